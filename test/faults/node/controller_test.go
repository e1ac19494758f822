package node

import (
	"fmt"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestControllerDown kills the controller (SIGKILL: its leader lease is not
// released), creates an ImageWarm, and starts a new controller later. The
// agents do not need the controller to warm; only the ImageWarm's status
// waits for it.
func TestControllerDown(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	imgs := pushSmall(t, reg, "ctl/app", 3, testbed.MB)
	refs := []string{imgs[0].Ref, imgs[1].Ref, imgs[2].Ref}
	all := keys(t, refs)
	f := startFleet(t, map[string]map[string]string{"node-1": nil, "node-2": nil}, testbed.FleetOptions{})

	// A first ImageWarm made Ready shows the controller leads before it dies.
	f.Create(t, testbed.NewWarm(ns, "first", nil, refs[0]))
	testbed.Eventually(t, 90*time.Second, "first ImageWarm Ready", func() error { return warmReady(f, "first", 2) })
	f.Controller.Kill()
	killed := time.Now()
	f.Create(t, testbed.NewWarm(ns, "headless", nil, refs[1:]...))
	for name, n := range f.Nodes {
		testbed.Eventually(t, 90*time.Second, "images on "+name+" without a controller", func() error { return n.AllPresent(t, refs...) })
		testbed.Eventually(t, 30*time.Second, "NodeWarm of "+name+" reports them", func() error {
			return listsExactly(f, name, all, true)
		})
	}
	// Down a while: nobody sums the reports up, the status stays as created.
	time.Sleep(time.Until(killed.Add(5 * time.Second)))
	if st := f.ImageWarm(t, ns, "headless").Status; st.ObservedGeneration != 0 || len(st.Conditions) != 0 {
		t.Fatalf("status written with the controller down: %+v", st)
	}

	restarted := time.Now()
	f.Controller = f.StartController(t)
	testbed.Eventually(t, 90*time.Second, "status catches up", func() error { return warmReady(f, "headless", 2) })
	t.Logf("status Ready %v after a new controller started, %v after the old one was killed (its lease must expire first)",
		time.Since(restarted).Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond))
	st := f.ImageWarm(t, ns, "headless").Status
	if len(st.Images) != len(refs)-1 {
		t.Fatalf("status lists %d images, want %d: %+v", len(st.Images), len(refs)-1, st.Images)
	}
	for _, img := range st.Images {
		if img.Ready != 2 {
			t.Errorf("%s ready on %d nodes, want 2", img.Image, img.Ready)
		}
	}
	if err := noPulling(st); err != nil {
		t.Error(err)
	}
}

func noPulling(st warmv1.ImageWarmStatus) error {
	if st.Nodes.Pulling != 0 || st.Nodes.Failed != 0 || st.Nodes.NotReporting != 0 {
		return fmt.Errorf("nodes %+v", st.Nodes)
	}
	return nil
}
