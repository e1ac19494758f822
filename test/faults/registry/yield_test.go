package registry

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestYieldToKubelet pulls an image through the node's CRI socket as the
// kubelet does for a starting Pod, slowed so it takes seconds, and asks
// the agent (default --yield-to-kubelet=pause) to warm another image
// meanwhile: the agent must not start its pull until the kubelet's is
// done, must say it yields (NodeWarm condition, metric), and must warm the
// image right after.
func TestYieldToKubelet(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: agentSettings()})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "yield"})
	p := faults.StartFaultProxy(t, reg.Host)
	const rate = 2 * testbed.MB
	pod := via(reg.PushRandom(t, "yield/pod:v1", testbed.ImageOptions{LayerSize: 16 * testbed.MB}), reg, p)
	warmed := reg.PushRandom(t, "yield/warm:v1", testbed.ImageOptions{LayerSize: testbed.MB}).Ref
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: int(rate)})
	n := f.Nodes[node]

	kubelet, err := criclient.New(context.Background(), criclient.Config{Endpoint: n.Containerd.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubelet.Close() })
	store, err := kubelet.ContentStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := kubelet.PullImage(context.Background(), pod, nil); done <- err }()
	testbed.Eventually(t, 30*time.Second, "the kubelet's layer under way", func() error {
		ing, err := store.Ingests(context.Background())
		if err != nil {
			return err
		}
		for _, i := range ing {
			if i.Offset > testbed.MB {
				return nil
			}
		}
		return errf("ingests %+v", ing)
	})

	warm(t, f, "beside-kubelet", 0, warmed)
	testbed.Eventually(t, 10*time.Second, "the agent yielding", func() error {
		nw, err := f.NodeWarm(node)
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionYielding); c == nil || c.Reason != warmv1.ReasonRuntimePulling {
			return errf("conditions %+v", nw.Status.Conditions)
		}
		return nil
	})
	if y := n.Metric(t, "warmer_image_pulls_yielding"); y != 1 {
		t.Errorf("warmer_image_pulls_yielding %v while yielding", y)
	}
	var kubeletDone time.Time
	for kubeletDone.IsZero() {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the kubelet's pull: %v", err)
			}
			kubeletDone = time.Now()
		case <-time.After(200 * time.Millisecond):
			if n.Present(t, warmed) {
				t.Fatalf("%s pulled while the kubelet's pull was under way", warmed)
			}
		}
	}
	waitPresent(t, f, node, warmed, testbed.SettleMargin)
	t.Logf("warmed %v after the kubelet's pull ended", time.Since(kubeletDone).Round(100*time.Millisecond))
	testbed.Eventually(t, testbed.SettleMargin, "Yielding gone", func() error {
		nw, err := f.NodeWarm(node)
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionYielding); c != nil {
			return errf("condition %+v", c)
		}
		return nil
	})
	if y := n.Metric(t, "warmer_image_pull_yields_total"); y < 1 {
		t.Errorf("warmer_image_pull_yields_total %v", y)
	}
	if !strings.Contains(n.Agent.Log(200), "Yielding to a pull the runtime makes for someone else") {
		t.Error("the agent's log does not say it yielded")
	}
}
