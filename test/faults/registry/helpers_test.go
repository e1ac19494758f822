package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const (
	ns = "default"
	// slack is how late a retry may come after its back-off ends: the
	// agent requeues a failing image for the moment its back-off ends, so
	// what remains is a pass running, the throttle letting it through and
	// the runtime starting the pull, on a shared machine.
	slack = testbed.BusyMargin
)

// settings are the fleet defaults with a short back-off, so that a test
// sees several retries in seconds; the waits below derive from them. The
// back-off has no jitter: these tests check the kubelet's schedule to the
// gap.
var settings = func() testbed.AgentSettings {
	s := testbed.DefaultAgent
	s.BackOffInitial, s.BackOffMax = time.Second, 4*time.Second
	s.ExactBackOff = true
	return s
}()

// agentSettings are settings with more flags.
func agentSettings(extra ...string) *testbed.AgentSettings {
	s := settings.With(extra...)
	return &s
}

// recovered is how long an image may take to be present once its fault is
// gone: the longest back-off the agent may be in, then a pull.
var recovered = settings.BackOffMax + testbed.SettleMargin

// via rewrites an image reference to go through a proxy.
func via(img testbed.Image, reg *testbed.Registry, p *faults.FaultProxy) string {
	return strings.Replace(img.Ref, reg.Host, p.Host, 1)
}

// warm creates an ImageWarm for every node and deletes it at the end of
// the subtest, so that its failing pulls stop competing with the next.
func warm(t *testing.T, f *testbed.Fleet, name string, timeout time.Duration, refs ...string) {
	t.Helper()
	create(t, f, build.ImageWarm(ns, name, build.Images(refs...)), timeout)
}

// create creates iw with a pullTimeout, if any, and deletes it at cleanup.
func create(t *testing.T, f *testbed.Fleet, iw *warmv1.ImageWarm, timeout time.Duration) {
	t.Helper()
	if timeout > 0 {
		iw.Spec.PullTimeout = &metav1.Duration{Duration: timeout}
	}
	f.Create(t, iw)
	t.Cleanup(func() { _ = f.CP.Client.Delete(context.Background(), iw) })
}

// waitReason waits until the node's entry for ref fails with reason and
// returns it.
func waitReason(t *testing.T, f *testbed.Fleet, node, ref, reason string, within time.Duration) warmv1.NodeImage {
	t.Helper()
	var got warmv1.NodeImage
	testbed.Eventually(t, within, ref+" failing with "+reason, func() error {
		var err error
		if got, err = f.NodeImage(node, ref); err != nil {
			return err
		}
		if got.Reason != reason {
			return fmt.Errorf("state %s, reason %q, message %q", got.State, got.Reason, got.Message)
		}
		return nil
	})
	return got
}

// waitPresent waits until the runtime holds ref and the NodeWarm says so
// without a reason.
func waitPresent(t *testing.T, f *testbed.Fleet, node, ref string, within time.Duration) {
	t.Helper()
	testbed.Eventually(t, within, ref+" present", func() error {
		got, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if got.State != warmv1.ImagePresent || got.Reason != "" {
			return fmt.Errorf("state %s, reason %q, message %q", got.State, got.Reason, got.Message)
		}
		return f.Nodes[node].AllPresent(t, ref)
	})
}

// failedEvent returns the note of the earliest Failed event on the warm
// that names reason, waiting for it: the agent sums up an ImageWarm's
// failures once they held still for a few seconds (controllers/agent/plan
// failures.go).
func failedEvent(t *testing.T, f *testbed.Fleet, name, reason string) (string, error) {
	t.Helper()
	var note string
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if note, err = findFailed(t, f, name, reason); err == nil || time.Now().After(deadline) {
			return note, err
		}
	}
}

func findFailed(t *testing.T, f *testbed.Fleet, name, reason string) (string, error) {
	t.Helper()
	evs := f.Events(t, ns, name, "Failed")
	sort.Slice(evs, func(i, j int) bool { return evs[i].EventTime.Before(&evs[j].EventTime) })
	for _, e := range evs {
		if strings.Contains(e.Note, ": "+reason+": ") {
			return e.Note, nil
		}
	}
	return "", fmt.Errorf("no Failed event with reason %s among %d", reason, len(evs))
}

// attempts groups the proxy's manifest HEADs into pull attempts: containerd
// resolves a tag with one HEAD, and repeats it at once on some answers
// (429), so HEADs less than half a second apart are one attempt. It
// returns when each attempt started and how many requests it made.
func attempts(reqs []faults.ProxyRequest) ([]time.Time, []int) {
	var starts []time.Time
	var sizes []int
	var last time.Time
	for _, r := range reqs {
		if r.Method != "HEAD" || !strings.Contains(r.Path, "/manifests/") {
			continue
		}
		if len(starts) == 0 || r.At.Sub(last) > 500*time.Millisecond {
			starts = append(starts, r.At)
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1]++
		last = r.At
	}
	return starts, sizes
}

// waitAttempts waits until the proxy has seen n pull attempts, for as long
// as the back-off between them may take.
func waitAttempts(t *testing.T, p *faults.FaultProxy, n int) ([]time.Time, []int) {
	t.Helper()
	var starts []time.Time
	var sizes []int
	within := testbed.SettleMargin
	for i := 1; i < n; i++ {
		within += settings.BackOff(i) + slack
	}
	testbed.Eventually(t, within, fmt.Sprintf("%d pull attempts", n), func() error {
		if starts, sizes = attempts(p.Requests()); len(starts) < n {
			return fmt.Errorf("%d attempts so far", len(starts))
		}
		return nil
	})
	return starts[:n], sizes[:n]
}

// checkBackOff asserts that the gaps between attempts follow the agent's
// back-off: each at least the back-off due (settings.BackOff: doubling from
// BackOffInitial, capped at BackOffMax), at most that plus slack, and
// growing until the cap.
func checkBackOff(t *testing.T, starts []time.Time) []time.Duration {
	t.Helper()
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		due := settings.BackOff(i)
		gap := starts[i].Sub(starts[i-1])
		gaps = append(gaps, gap.Round(10*time.Millisecond))
		// The back-off runs from the failure, which comes after the
		// attempt's first request: a gap can only be longer.
		if gap < due-50*time.Millisecond || gap > due+slack {
			t.Errorf("attempt %d came %v after the previous one; back-off due %v (slack %v)", i+1, gap, due, slack)
		}
	}
	for i := 1; i < len(gaps) && i < 3; i++ {
		if gaps[i] <= gaps[i-1] {
			t.Errorf("back-off did not grow: gaps %v", gaps)
		}
	}
	t.Logf("gaps between pull attempts: %v", gaps)
	return gaps
}

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }
