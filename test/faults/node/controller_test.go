package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestControllerDown kills the controller (SIGKILL: its leader lease is not
// released), creates an ImageWarm, and starts a new controller later. The
// agents do not need the controller to warm; only the ImageWarm's status
// waits for it, and the new controller waits out the dead one's lease.
func TestControllerDown(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	imgs := pushSmall(t, reg, "ctl/app", 3, testbed.MB)
	refs := []string{imgs[0].Ref, imgs[1].Ref, imgs[2].Ref}
	all := keys(t, refs)
	f := startFleet(t, map[string]map[string]string{"node-1": nil, "node-2": nil}, testbed.FleetOptions{})

	// A first ImageWarm made Ready shows the controller leads before it dies.
	f.Create(t, build.ImageWarm(ns, "first", build.Images(refs[0])))
	testbed.Eventually(t, 90*time.Second, "first ImageWarm Ready", func() error { return warmReady(f, "first", 2) })
	f.Controller.Kill()
	killed := time.Now()
	f.Create(t, build.ImageWarm(ns, "headless", build.Images(refs[1:]...)))
	for name, n := range f.Nodes {
		testbed.Eventually(t, 90*time.Second, "images on "+name+" without a controller", func() error { return n.AllPresent(t, refs...) })
		testbed.Eventually(t, 30*time.Second, "NodeWarm of "+name+" reports them", func() error {
			return listsExactly(f, name, all, true)
		})
	}
	// Down a while: nobody sums the reports up, the status stays as created.
	time.Sleep(time.Until(killed.Add(5 * time.Second)))
	if err := unwritten(f, "headless"); err != nil {
		t.Fatalf("with the controller down: %v", err)
	}

	restarted := time.Now()
	f.Controller = f.StartController(t)
	// The new controller counts the dead one's Lease from its own first
	// read of it, after it started: until then nobody writes the status
	// (a second before, for the read's own time).
	for lease := f.ControllerSettings.LeaseDuration; time.Since(restarted) < lease-time.Second; time.Sleep(time.Second) {
		if err := unwritten(f, "headless"); err != nil {
			t.Fatalf("%v after the new controller started, within the dead one's %v lease: %v", time.Since(restarted).Round(100*time.Millisecond), lease, err)
		}
	}
	// It leads once the lease has run out and its next try comes
	// (ControllerSettings.TakeOver), then sums the reports up.
	takeOver := f.ControllerSettings.TakeOver()
	testbed.Eventually(t, time.Until(restarted.Add(takeOver+testbed.SettleMargin)), "status catches up", func() error {
		return warmReady(f, "headless", 2)
	})
	t.Logf("status Ready %v after a new controller started, %v after the old one was killed (its %v lease must expire first; take-over within %v)",
		time.Since(restarted).Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond),
		f.ControllerSettings.LeaseDuration, takeOver)
	// Images every node has are counted, not listed (the status budget).
	st := f.ImageWarm(t, ns, "headless").Status
	if st.ImageCount != int32(len(refs)-1) || st.ReadyImages != st.ImageCount || len(st.Images) != 0 {
		t.Fatalf("status counts %d images, %d ready, lists %+v; want %d ready, none listed", st.ImageCount, st.ReadyImages, st.Images, len(refs)-1)
	}
	if err := noPulling(st); err != nil {
		t.Error(err)
	}
}

// unwritten checks that no controller wrote the ImageWarm's status.
func unwritten(f *testbed.Fleet, name string) error {
	var iw warmv1.ImageWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &iw); err != nil {
		return err
	}
	if st := iw.Status; st.ObservedGeneration != 0 || len(st.Conditions) != 0 {
		return fmt.Errorf("status written: %+v", st)
	}
	return nil
}

func noPulling(st warmv1.ImageWarmStatus) error {
	if st.Nodes.Pulling != 0 || st.Nodes.Failed != 0 || st.Nodes.NotReporting != 0 {
		return fmt.Errorf("nodes %+v", st.Nodes)
	}
	return nil
}
