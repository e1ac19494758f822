package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestAgentKilledMidPull SIGKILLs the agent while it pulls, and starts it
// again: it has no state but what it finds in the runtime and the API.
func TestAgentKilledMidPull(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{})
	slow := faults.StartSlowProxy(t, reg.Host, 1<<20)
	// Three small images come first and finish before the kill; the four
	// slow ones (4 s each at 1 MB/s, three at a time) are caught under way.
	fast := pushSmall(t, reg, "kill/fast", 3, testbed.MB)
	refs := append(through(pushSmall(t, reg, "kill/slow", 4, 4*testbed.MB), reg, slow),
		fast[0].Ref, fast[1].Ref, fast[2].Ref)
	f := startFleet(t, map[string]map[string]string{"node-1": nil}, testbed.FleetOptions{})
	n := f.Nodes["node-1"]

	// The fast images are present before the slow ones start, so that the
	// kill finds the slow ones under way and the fast ones done.
	f.Create(t, build.ImageWarm(ns, "fast", build.Images(refs[4:]...)))
	testbed.Eventually(t, 60*time.Second, "fast images present", func() error { return n.AllPresent(t, refs[4:]...) })
	f.Create(t, build.ImageWarm(ns, "slow", build.Images(refs[:4]...)))
	waitPulling(t, f, "node-1", key(t, refs[0]))
	n.Agent.Kill()
	// The runtime ends the pulls of a client that went away.
	time.Sleep(2 * time.Second)
	if err := criConsistent(t, n); err != nil {
		t.Errorf("after the kill: %v", err)
	}
	var before []string
	for _, r := range refs {
		if n.Present(t, r) {
			before = append(before, r)
		}
	}
	t.Logf("%d of %d images present when the agent restarts", len(before), len(refs))
	if len(before) == len(refs) {
		t.Fatal("every image was present before the kill: no pull was caught under way")
	}

	n.RestartAgent(t)
	restarted := time.Now()
	testbed.Eventually(t, 120*time.Second, "every image present after the restart", func() error { return n.AllPresent(t, refs...) })
	t.Logf("all images present %v after the agent restarted", time.Since(restarted).Round(100*time.Millisecond))
	testbed.Eventually(t, 30*time.Second, "NodeWarm agrees with the runtime", func() error { return agreesWithCRI(t, f, n, refs) })
	if err := criConsistent(t, n); err != nil {
		t.Error(err)
	}
	// The new agent pulled only what was missing: the state it lost was
	// rebuilt from the runtime, not from scratch.
	if got, want := n.Metric(t, "warmer_image_pulls_total", `result="success"`), len(refs)-len(before); int(got) != want {
		t.Errorf("restarted agent pulled %v images, want %d (those missing at restart)", got, want)
	}
}

// agreesWithCRI checks that the NodeWarm lists exactly refs, Present with
// the image ID the runtime reports for each.
func agreesWithCRI(t *testing.T, f *testbed.Fleet, n *testbed.Node, refs []string) error {
	if err := listsExactly(f, n.Name, keys(t, refs), true); err != nil {
		return err
	}
	for _, r := range refs {
		img, err := f.NodeImage(n.Name, key(t, r))
		if err != nil {
			return err
		}
		st, err := n.CRI.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: r}})
		if err != nil {
			return err
		}
		if st.Image == nil || img.State != warmv1.ImagePresent || img.Digest == "" || !hasRepoDigest(st.Image, img.Digest) {
			return fmt.Errorf("%s: NodeWarm says %s %s, runtime says %v", r, img.State, img.Digest, st.Image)
		}
	}
	return nil
}

// hasRepoDigest says whether the runtime lists the image under digest.
func hasRepoDigest(img *runtimeapi.Image, digest string) bool {
	for _, d := range img.RepoDigests {
		if strings.HasSuffix(d, "@"+digest) {
			return true
		}
	}
	return false
}
