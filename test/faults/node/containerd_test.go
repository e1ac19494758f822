package node

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"

	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestContainerdKilledDuringPulls kills a node's containerd while the agent
// has pulls under way, leaves it down a while, then starts it again.
func TestContainerdKilledDuringPulls(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	// 1 MB/s per connection: a 4 MB image takes about 4 s, so the kill
	// finds pulls in flight.
	slow := faults.StartSlowProxy(t, reg.Host, 1<<20)
	refs := through(pushSmall(t, reg, "crash/app", 4, 4*testbed.MB), reg, slow)
	f := startFleet(t, map[string]map[string]string{"node-1": nil}, testbed.FleetOptions{})
	n := f.Nodes["node-1"]
	testbed.Eventually(t, 30*time.Second, "agent ready", func() error { return ready(n) })

	f.Create(t, build.ImageWarm(ns, "crash", build.Images(refs...)))
	waitPulling(t, f, "node-1", key(t, refs[0]))
	n.Containerd.Kill()
	killed := time.Now()

	testbed.Eventually(t, 20*time.Second, "/readyz failing with the runtime down", func() error {
		if ready(n) == nil {
			return fmt.Errorf("still ready")
		}
		return nil
	})
	t.Logf("/readyz failed %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	testbed.Eventually(t, 30*time.Second, "RuntimeReady False in the NodeWarm", func() error {
		return wantRuntimeReady(f, "node-1", metav1.ConditionFalse)
	})
	// Down long enough for the agent to retry two passes against a
	// missing socket.
	time.Sleep(2*f.AgentSettings.Resync + testbed.BusyMargin)
	if n.Agent.Exited() {
		t.Fatalf("agent exited while containerd was down:\n%s", n.Agent.Log(30))
	}
	if ready(n) == nil {
		t.Fatal("/readyz ready while containerd is down")
	}

	n.Containerd.Start()
	restarted := time.Now()
	// The CRI connection's reconnect back-off is capped at 3 s, so the
	// agent notices the runtime again within seconds however long it was
	// down (10 s leaves room for a busy machine).
	testbed.Eventually(t, 10*time.Second, "/readyz ready again", func() error { return ready(n) })
	t.Logf("/readyz ready %v after containerd restarted", time.Since(restarted).Round(100*time.Millisecond))
	testbed.Eventually(t, 120*time.Second, "every image present after the restart", func() error { return n.AllPresent(t, refs...) })
	t.Logf("all %d images present %v after containerd restarted", len(refs), time.Since(restarted).Round(100*time.Millisecond))
	testbed.Eventually(t, 30*time.Second, "NodeWarm lists each image once, Present", func() error {
		if err := wantRuntimeReady(f, "node-1", metav1.ConditionTrue); err != nil {
			return err
		}
		return listsExactly(f, "node-1", keys(t, refs), true)
	})
	if err := criConsistent(t, n); err != nil {
		t.Error(err)
	}
	// The pulls the crash cut short failed, and say so.
	failed := f.Events(t, ns, "crash", "Failed")
	if len(failed) == 0 {
		t.Error("no Failed event for the pulls containerd's crash cut short")
	} else {
		t.Logf("%d Failed events, e.g. %q", len(failed), failed[0].Note)
	}
	if n.Agent.Exited() {
		t.Errorf("agent exited:\n%s", n.Agent.Log(30))
	}
}
