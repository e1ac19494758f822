package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// The fleet of TestRegistryFaults writes bytes alone every second and
// cancels a pull whose bytes stop for stallTimeout.
const (
	bytesInterval = time.Second
	stallTimeout  = 10 * time.Second
)

// testProgress slows a pull's blobs to a known rate and reads its bytes
// in the NodeWarm while it runs: they move, never pass the total (the
// config and the layer), come with a time left, and the node's sum and
// Progress column say the same; the throughput metric is near the rate,
// and once the image is present the fields are gone and the fetched bytes
// counted cover the layer.
func testProgress(t *testing.T, f *testbed.Fleet, reg *testbed.Registry) {
	p := faults.StartFaultProxy(t, reg.Host)
	const rate = testbed.MB
	img := reg.PushRandom(t, "progress/app:v1", testbed.ImageOptions{LayerSize: 16 * testbed.MB})
	ref := via(img, reg, p)
	n := f.Nodes[node]
	fetchedBefore := n.Metric(t, "warmer_image_fetched_bytes_total")
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: rate})
	warm(t, f, "progress", 0, ref)

	first := waitProgress(t, f, ref, 0)
	checkProgress(t, first, img.Size)
	later := waitProgress(t, f, ref, first.BytesDone)
	checkProgress(t, later, img.Size)
	if later.SecondsLeft == nil {
		t.Errorf("progress %+v a while into the pull has no time left", later)
	}
	if tp := n.Metric(t, "warmer_image_pull_throughput_bytes_per_second"); tp < rate/4 || tp > rate*4 {
		t.Errorf("throughput %v B/s while the registry sends %d B/s", tp, rate)
	}
	nw, err := f.NodeWarm(node)
	if err != nil {
		t.Fatal(err)
	}
	if nw.Status.PullProgress == nil || !strings.Contains(nw.Status.Progress, " of ") {
		t.Errorf("NodeWarm pullProgress %+v, progress %q while pulling", nw.Status.PullProgress, nw.Status.Progress)
	}
	t.Logf("progress: %+v, then %+v; column %q", first, later, nw.Status.Progress)

	waitPresent(t, f, node, ref, time.Duration(img.Size/rate)*time.Second+testbed.SettleMargin)
	testbed.Eventually(t, testbed.SettleMargin, "progress gone once present", func() error {
		got, err := f.NodeWarm(node)
		if err != nil {
			return err
		}
		img, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if got.Status.PullProgress != nil || got.Status.Progress != "" || img.Progress != nil {
			return errf("pullProgress %+v, progress %q, image progress %+v", got.Status.PullProgress, got.Status.Progress, img.Progress)
		}
		return nil
	})
	if d := n.Metric(t, "warmer_image_fetched_bytes_total") - fetchedBefore; d < float64(img.Size) {
		t.Errorf("%v bytes fetched counted, want at least the layer's %d", d, img.Size)
	}
}

// waitProgress waits for the image's progress to pass after bytes.
func waitProgress(t *testing.T, f *testbed.Fleet, ref string, after int64) warmv1.PullProgress {
	t.Helper()
	var got warmv1.PullProgress
	testbed.Eventually(t, 30*time.Second, fmt.Sprintf("progress past %d bytes", after), func() error {
		img, err := f.NodeImage(node, ref)
		if err != nil {
			return err
		}
		if img.Progress == nil || img.Progress.BytesDone <= after {
			return errf("state %s, progress %+v", img.State, img.Progress)
		}
		got = *img.Progress
		return nil
	})
	return got
}

// checkProgress holds a reading against the image: the total is its
// layer and a config of a few hundred bytes, the bytes done within it.
func checkProgress(t *testing.T, p warmv1.PullProgress, layers int64) {
	t.Helper()
	if p.BytesTotal <= layers || p.BytesTotal > layers+64<<10 || p.BytesDone > p.BytesTotal {
		t.Errorf("progress %+v; want a total just above the layer's %d bytes, done within it", p, layers)
	}
}

// testStalled holds a blob after its first megabyte: the agent cancels
// the pull once its bytes have stood still for the stall timeout, reports
// it Stalled (status and event) and, once the registry sends again,
// pulls the image after the usual back-off.
func testStalled(t *testing.T, f *testbed.Fleet, reg *testbed.Registry) {
	p := faults.StartFaultProxy(t, reg.Host)
	ref := via(reg.PushRandom(t, "stall/app:v1", testbed.ImageOptions{LayerSize: 8 * testbed.MB}), reg, p)
	p.Set(faults.Fault{Mode: faults.FaultStall, Paths: faults.BlobPaths, StallAfter: int(testbed.MB)})
	start := time.Now()
	warm(t, f, "stalled", 0, ref)
	got := waitReason(t, f, node, ref, warmv1.ReasonStalled, stallTimeout+testbed.SettleMargin)
	if d := time.Since(start); d < stallTimeout {
		t.Errorf("Stalled after %v, before the %v stall timeout", d, stallTimeout)
	}
	if !strings.Contains(got.Message, "no bytes arrived for 10s") {
		t.Errorf("message %q does not say the stall timeout", got.Message)
	}
	note, err := failedEvent(t, f, "stalled", warmv1.ReasonStalled)
	if err != nil {
		t.Error(err)
	}
	t.Logf("status: %s %s: %s; event: %s", got.State, got.Reason, got.Message, note)
	p.Pass()
	waitPresent(t, f, node, ref, recovered)
}

// TestProgressWritesPaced holds the NodeWarm's writes to the pace of
// bytes alone (plan.BytesPace): one node pulling fleet-wide writes its
// bytes every 2 s (plan.FastBytesPace), under the agent's default
// --pull-progress-interval (30s, the pace of hundreds of nodes), so a
// pull of about ten seconds shows its bytes move a few times and no more
// (the fleet of TestRegistryFaults, writing bytes every second, would
// write about ten times).
func TestProgressWritesPaced(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: agentSettings()})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "paced"})
	p := faults.StartFaultProxy(t, reg.Host)
	const rate = testbed.MB
	img := reg.PushRandom(t, "paced/app:v1", testbed.ImageOptions{LayerSize: 10 * testbed.MB})
	ref := via(img, reg, p)
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: rate})
	n := f.Nodes[node]
	testbed.Eventually(t, testbed.SettleMargin, "the empty NodeWarm written", func() error {
		_, err := f.NodeWarm(node)
		return err
	})
	time.Sleep(testbed.BusyMargin) // the agent's first writes are over
	before := n.Metric(t, "warmer_nodewarm_writes_total", `result="ok"`)
	start := time.Now()
	warm(t, f, "paced", 0, ref)
	waitPresent(t, f, node, ref, time.Duration(img.Size/rate)*time.Second+testbed.SettleMargin)
	took := time.Since(start)
	time.Sleep(testbed.BusyMargin) // a late write would come now
	writes := n.Metric(t, "warmer_nodewarm_writes_total", `result="ok"`) - before
	t.Logf("a %v warm cost %v NodeWarm writes", took.Round(100*time.Millisecond), writes)
	if took < 8*time.Second {
		t.Fatalf("the warm took only %v: the pull was not slowed enough to show pacing", took)
	}
	// Its start (Queued, then Pulling, when apart) and its result; one
	// more when the shared disk's fill level moved meanwhile (the status
	// reports it); and the bytes, at most once per FastBytesPace. Bytes
	// written every second would make about ten more.
	paced := took / plan.FastBytesPace
	if writes < 3 || writes > float64(4+paced) {
		t.Errorf("%v NodeWarm writes for a %v warm, want 3 (the bytes moved at least once) to %d", writes, took.Round(100*time.Millisecond), 4+paced)
	}
}
