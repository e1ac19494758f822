// Package e2e runs warmer end to end on the test bed: the real controller
// and agent binaries against a real kube-apiserver, real containerd
// instances (one per simulated node) and real registries.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const ns = "e2e"

// TestE2E walks one fleet through the life of a few ImageWarms. The steps
// build on each other, in order.
func TestE2E(t *testing.T) {
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, false)
	f := testbed.StartFleet(t, map[string]map[string]string{
		"node-1": {"pool": "web"},
		"node-2": {"pool": "web"},
		"node-3": {"pool": "batch"},
	}, testbed.FleetOptions{})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	web := []string{cat.Small.Ref, cat.Medium.Ref, cat.Layered.Ref, cat.MultiArch.Ref}
	pulls := map[string]int{} // successful pulls expected per node, for the metrics check

	t.Run("warms the selected nodes only", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "web", build.Images(web...), build.MatchLabel("pool", "web")))
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/web", "-n", ns, "--timeout=120s"); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
		for _, n := range []string{"node-1", "node-2"} {
			if err := f.Nodes[n].AllPresent(t, web...); err != nil {
				t.Fatal(err)
			}
			pulls[n] += len(web)
		}
		for _, ref := range web {
			if f.Nodes["node-3"].Present(t, ref) {
				t.Errorf("node-3 is not selected but has %s", ref)
			}
		}
		out, err := f.CP.Kubectl(t, "get", "imagewarms", "-n", ns)
		if err != nil {
			t.Fatal(err)
		}
		if row := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1]); strings.Join(row[:6], " ") != "web 4 2 2 0 True" {
			t.Errorf("kubectl get imagewarms row: %v, want web 4 2 2 0 True\n%s", row, out)
		}
	})

	t.Run("relabelled node warms too", func(t *testing.T) {
		var node corev1.Node
		if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: "node-3"}, &node); err != nil {
			t.Fatal(err)
		}
		node.Labels["pool"] = "web"
		if err := f.CP.Client.Update(context.Background(), &node); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 90*time.Second, "node-3 warm", func() error { return f.Nodes["node-3"].AllPresent(t, web...) })
		pulls["node-3"] += len(web)
		testbed.Eventually(t, 30*time.Second, "status counts 3 ready nodes", func() error {
			iw := f.ImageWarm(t, ns, "web")
			if iw.Status.Nodes.Matching != 3 || iw.Status.Nodes.Ready != 3 {
				return fmt.Errorf("nodes %+v", iw.Status.Nodes)
			}
			return nil
		})
	})

	t.Run("evicted image comes back", func(t *testing.T) {
		n := f.Nodes["node-1"]
		n.Remove(t, cat.Small.Ref)
		testbed.Eventually(t, 60*time.Second, "small back on node-1", func() error { return n.AllPresent(t, cat.Small.Ref) })
		pulls["node-1"]++
		testbed.Eventually(t, 15*time.Second, "Evicted event", func() error {
			for _, e := range f.Events(t, ns, "web", "Evicted") {
				if strings.Contains(e.Note, "node-1") && strings.Contains(e.Note, cat.Small.Ref) {
					return nil
				}
			}
			return fmt.Errorf("no Evicted event for %s from node-1", cat.Small.Ref)
		})
	})

	t.Run("private image with the right secret", func(t *testing.T) {
		f.CP.LendPullSecrets(t, ns)
		f.Create(t, build.DockerConfigSecret(ns, "regcred", regs.Auth.Host, regs.Auth.Username(), regs.Auth.Password()))
		iw := build.ImageWarm(ns, "private", build.Images(cat.Private.Ref))
		iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
		f.Create(t, iw)
		for name, n := range f.Nodes {
			testbed.Eventually(t, 60*time.Second, "private image on "+name, func() error { return n.AllPresent(t, cat.Private.Ref) })
			pulls[name]++
		}
	})

	t.Run("wrong secret fails Unauthorized, others still warm, fix retries at once", func(t *testing.T) {
		other := regs.Auth.PushRandom(t, "private/other:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		extra := regs.Anon.PushRandom(t, "test/extra:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		bad := build.DockerConfigSecret(ns, "badcred", regs.Auth.Host, regs.Auth.Username(), "wrong-password")
		f.Create(t, bad)
		iw := build.ImageWarm(ns, "mixed", build.Images(other.Ref, extra.Ref))
		iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "badcred"}}
		created := time.Now() // no pull of it fails before this
		f.Create(t, iw)
		for name, n := range f.Nodes {
			testbed.Eventually(t, 60*time.Second, "Unauthorized on "+name, func() error {
				img, err := f.NodeImage(name, other.Ref)
				if err != nil {
					return err
				}
				if img.Reason != "Unauthorized" {
					return fmt.Errorf("state %s reason %q", img.State, img.Reason)
				}
				return nil
			})
			testbed.Eventually(t, 60*time.Second, "public image of the same ImageWarm on "+name, func() error { return n.AllPresent(t, extra.Ref) })
			pulls[name]++
		}
		testbed.Eventually(t, 15*time.Second, "Failed event naming Unauthorized", func() error {
			for _, e := range f.Events(t, ns, "mixed", "Failed") {
				if strings.Contains(e.Note, "Unauthorized") {
					return nil
				}
			}
			return fmt.Errorf("no Failed event with Unauthorized")
		})
		testbed.Eventually(t, 30*time.Second, "status Degraded with Unauthorized", func() error {
			st := f.ImageWarm(t, ns, "mixed").Status
			if st.Nodes.Failed != 3 || len(st.Failures) == 0 || st.Failures[0].Reason != "Unauthorized" {
				return fmt.Errorf("nodes %+v failures %+v", st.Nodes, st.Failures)
			}
			return nil
		})
		// A fixed secret must not wait for the back-off: each node must
		// pull before its back-off could have ended.
		backOffEnds := map[string]time.Time{}
		for name := range f.Nodes {
			backOffEnds[name] = backOffEnd(t, f, created, name, other.Ref)
		}
		fixed := build.DockerConfigSecret(ns, "badcred", regs.Auth.Host, regs.Auth.Username(), regs.Auth.Password())
		if err := f.CP.Client.Update(context.Background(), fixed); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for name, n := range f.Nodes {
			// The controller seals the secret again within its resync,
			// and the agent reads its bundle on each pass, so both must fit
			// in what is left of the back-off, or the test cannot tell.
			left := time.Until(backOffEnds[name])
			if need := f.ControllerSettings.PullSecretResync + f.AgentSettings.Resync + testbed.BusyMargin; left < need {
				t.Fatalf("%s: %v of the back-off left, a retry at once needs up to %v: cannot tell it from the back-off's end",
					name, left.Round(100*time.Millisecond), need)
			}
			testbed.Eventually(t, left, "fixed secret on "+name+" within the back-off", func() error { return n.AllPresent(t, other.Ref) })
			pulls[name]++
		}
		t.Logf("fixed secret honoured after %v (back-off %v)", time.Since(start).Round(100*time.Millisecond), f.AgentSettings.BackOffInitial)
	})

	// Twelve missing tags on every node: each node sums them up in one
	// Failed event, and the retries that fail alike write none.
	t.Run("missing tags are NotFound, in one Failed event per node", func(t *testing.T) {
		var missing []string
		for i := range 12 {
			missing = append(missing, regs.Anon.Ref(fmt.Sprintf("test/small:nope-%02d", i)))
		}
		iw := build.ImageWarm(ns, "missing", build.Images(missing...))
		f.Create(t, iw)
		testbed.Eventually(t, 60*time.Second, "NotFound in status", func() error {
			st := f.ImageWarm(t, ns, "missing").Status
			if len(st.Failures) == 0 || st.Failures[0].Reason != "NotFound" || st.Failures[0].Node != "node-1" || st.Nodes.Failed != 3 {
				return fmt.Errorf("failures %+v, nodes %+v", st.Failures, st.Nodes)
			}
			return nil
		})
		want := "12 of 12 images failed to pull (NotFound 12)"
		folded := func() error {
			evs := f.Events(t, ns, "missing", "")
			nodes := map[string]bool{}
			for _, e := range evs {
				if e.Reason != "Failed" || !strings.Contains(e.Note, want) {
					return fmt.Errorf("event %s %q: want only Failed events saying %q", e.Reason, e.Note, want)
				}
				nodes[e.Related.Name] = true
			}
			if len(evs) != len(f.Nodes) || len(nodes) != len(f.Nodes) {
				return fmt.Errorf("%d events from %d nodes, want one from each of %d", len(evs), len(nodes), len(f.Nodes))
			}
			return nil
		}
		testbed.Eventually(t, 30*time.Second, "one Failed event per node", folded)
		// Every image retried at least once after its back-off, failing
		// alike: still one event per node, none patched into a series.
		testbed.Eventually(t, 2*f.AgentSettings.BackOffMax, "every missing image retried on node-1", func() error {
			for _, ref := range missing {
				img, err := f.NodeImage("node-1", ref)
				if err != nil {
					return err
				}
				if img.Attempts < 2 {
					return fmt.Errorf("%s: %d attempts", ref, img.Attempts)
				}
			}
			return nil
		})
		if err := folded(); err != nil {
			t.Error(err)
		}
		for _, e := range f.Events(t, ns, "missing", "Failed") {
			if e.Series != nil {
				t.Errorf("event of %s continued as a series (%d): the retries that failed alike wrote", e.Related.Name, e.Series.Count)
			}
		}
		if err := f.CP.Client.Delete(context.Background(), f.ImageWarm(t, ns, "missing")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stopped registry is RegistryUnavailable and recovers", func(t *testing.T) {
		flaky := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "flaky"})
		img := flaky.PushRandom(t, "flaky/app:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		flaky.Stop()
		f.Create(t, build.ImageWarm(ns, "flaky", build.Images(img.Ref), build.MatchLabel(corev1.LabelHostname, "node-2")))
		testbed.Eventually(t, 60*time.Second, "RegistryUnavailable", func() error {
			got, err := f.NodeImage("node-2", img.Ref)
			if err != nil {
				return err
			}
			if got.Reason != "RegistryUnavailable" {
				return fmt.Errorf("state %s reason %q", got.State, got.Reason)
			}
			return nil
		})
		flaky.Start()
		testbed.Eventually(t, 120*time.Second, "flaky image after the registry is back", func() error { return f.Nodes["node-2"].AllPresent(t, img.Ref) })
		pulls["node-2"]++
	})

	t.Run("deleted mid-pull: queued and running pulls cancelled", func(t *testing.T) {
		slow := faults.StartSlowProxy(t, regs.Anon.Host, 1<<20) // 1 MB/s: a 20 MB pull takes 20 s
		var refs []string
		for i := range 5 {
			img := regs.Anon.PushRandom(t, fmt.Sprintf("slow/app%d:v1", i), testbed.ImageOptions{LayerSize: 20 * testbed.MB})
			refs = append(refs, strings.Replace(img.Ref, regs.Anon.Host, slow.Host, 1))
		}
		f.Create(t, build.ImageWarm(ns, "bulk", build.Images(refs...), build.MatchLabel(corev1.LabelHostname, "node-3")))
		testbed.Eventually(t, 30*time.Second, "bulk pulls under way", func() error {
			img, err := f.NodeImage("node-3", refs[0])
			if err != nil {
				return err
			}
			if img.State != warmv1.ImagePulling && img.State != warmv1.ImageQueued {
				return fmt.Errorf("state %s", img.State)
			}
			return nil
		})
		if err := f.CP.Client.Delete(context.Background(), f.ImageWarm(t, ns, "bulk")); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 20*time.Second, "NodeWarm forgets the bulk images", func() error {
			for _, r := range refs {
				if _, err := f.NodeImage("node-3", r); err == nil {
					return fmt.Errorf("still lists %s", r)
				}
			}
			return nil
		})
		// Time for a pass that wrongly kept a queued pull to start it.
		time.Sleep(f.AgentSettings.Resync + testbed.BusyMargin)
		for _, r := range refs {
			if f.Nodes["node-3"].Present(t, r) {
				t.Errorf("%s was pulled although its ImageWarm was deleted", r)
			}
		}
		if c := f.Nodes["node-3"].Metric(t, "warmer_image_pulls_total", `reason="Canceled"`); c < 1 {
			t.Errorf("no cancelled pulls counted on node-3 (%v)", c)
		}
	})

	t.Run("metrics agree with what happened", func(t *testing.T) {
		for name, want := range pulls {
			got := f.Nodes[name].Metric(t, "warmer_image_pulls_total", `result="success"`)
			if int(got) != want {
				t.Errorf("%s: %v successful pulls counted, %d happened", name, got, want)
			}
		}
		if got := f.Nodes["node-1"].Metric(t, "warmer_image_pulls_total", `reason="NotFound"`); got < 1 {
			t.Errorf("node-1 counted no NotFound failure")
		}
		if got := f.Nodes["node-1"].Metric(t, "warmer_image_evictions_total"); got != 1 {
			t.Errorf("node-1 counted %v evictions, want 1", got)
		}
	})

	// The built agent's own output, as `kubectl logs` shows it, at the
	// debug level the fleet runs it with: every pull started, pulled
	// (with size and duration), failed (with its class) and cancelled.
	t.Run("the agent's log tells each pull", func(t *testing.T) {
		for node, want := range map[string][]logWant{
			"node-1": {{msg: "Pulling image"}, {msg: "Pulled image", keys: []string{"image", "size", "duration"}},
				{msg: "Failed to pull image", keys: []string{"image", "message"}, reason: "Unauthorized"}},
			"node-3": {{msg: "Pull cancelled", keys: []string{"image"}}},
		} {
			lines := agentLog(t, f.Nodes[node].Agent.LogPath())
			for _, w := range want {
				if !slices.ContainsFunc(lines, w.matches) {
					t.Errorf("%s: no log line %q with %v and reason %q", node, w.msg, w.keys, w.reason)
				}
			}
		}
	})
}

// logWant is a log line to find: its message, keys it must have, and a
// reason if any.
type logWant struct {
	msg    string
	keys   []string
	reason string
}

func (w logWant) matches(line map[string]any) bool {
	if line["msg"] != w.msg || (w.reason != "" && line["reason"] != w.reason) {
		return false
	}
	for _, k := range w.keys {
		if _, ok := line[k]; !ok {
			return false
		}
	}
	return true
}

// agentLog reads an agent's JSON log lines.
func agentLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// backOffEnd is the earliest time the back-off of a failing image on a node
// may end, by the NodeWarm's count of failures: the n-th failure comes at
// least the back-offs of the ones before it after the ImageWarm was
// created, and starts a back-off of its own.
func backOffEnd(t *testing.T, f *testbed.Fleet, created time.Time, node, ref string) time.Time {
	t.Helper()
	img, err := f.NodeImage(node, ref)
	if err != nil {
		t.Fatal(err)
	}
	if (img.State != warmv1.ImageBackOff && img.State != warmv1.ImageFailed) || img.Attempts < 1 {
		t.Fatalf("%s on %s: state %s after %d attempts, want BackOff", ref, node, img.State, img.Attempts)
	}
	end := created
	for i := 1; i <= int(img.Attempts); i++ {
		end = end.Add(f.AgentSettings.EarliestBackOff(i))
	}
	return end
}
