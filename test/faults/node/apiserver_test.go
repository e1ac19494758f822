package node

import (
	"testing"
	"time"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestAPIServerRestarted restarts kube-apiserver (etcd kept, same address
// and certificates) under a warm fleet: the agents and the controller must
// reconnect on their own, a new ImageWarm must converge, and no image may
// be pulled twice.
func TestAPIServerRestarted(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	imgs := pushSmall(t, reg, "api/app", 3, testbed.MB)
	a, b, c := imgs[0].Ref, imgs[1].Ref, imgs[2].Ref
	f := startFleet(t, map[string]map[string]string{"node-1": nil, "node-2": nil}, testbed.FleetOptions{})

	f.Create(t, build.ImageWarm(ns, "before", build.Images(a, b)))
	testbed.Eventually(t, 90*time.Second, "first ImageWarm Ready", func() error { return warmReady(f, "before", 2) })

	start := time.Now()
	f.CP.RestartAPIServer(t, 5*time.Second)
	t.Logf("kube-apiserver stopped and started again in %v", time.Since(start).Round(100*time.Millisecond))
	back := time.Now()

	f.Create(t, build.ImageWarm(ns, "after", build.Images(b, c)))
	testbed.Eventually(t, 120*time.Second, "ImageWarm created after the restart Ready", func() error { return warmReady(f, "after", 2) })
	t.Logf("ImageWarm created after the restart Ready %v after the API server was back", time.Since(back).Round(100*time.Millisecond))
	if err := warmReady(f, "before", 2); err != nil {
		t.Errorf("first ImageWarm after the restart: %v", err)
	}
	for name, n := range f.Nodes {
		if n.Agent.Exited() {
			t.Errorf("agent %s exited:\n%s", name, n.Agent.Log(30))
		}
		if err := n.AllPresent(t, a, b, c); err != nil {
			t.Error(err)
		}
		if err := listsExactly(f, name, keys(t, []string{a, b, c}), true); err != nil {
			t.Error(err)
		}
		// Each distinct image once: the restart made nobody pull again.
		if got := n.Metric(t, "warmer_image_pulls_total", `result="success"`); got != 3 {
			t.Errorf("%s: %v successful pulls, want 3 (one per distinct image)", name, got)
		}
		if got := n.Metric(t, "warmer_image_pulls_total"); got != 3 {
			t.Errorf("%s: %v pulls in all, want 3", name, got)
		}
	}
	if f.Controller.Exited() {
		t.Errorf("controller exited:\n%s", f.Controller.Log(30))
	}
}
