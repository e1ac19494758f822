package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestUnknownLevelHoldsByDefault runs the real agent binary, with no
// --image-fs-unknown and no kubelet to read, on a runtime that names no
// image filesystem (as an agent in a Pod sees one whose state is not
// mounted): the disk guard cannot read the level, so it must hold the
// pull, and the image's status must say why and what to do, in the words
// an ImageWarm's owner reads.
func TestUnknownLevelHoldsByDefault(t *testing.T) {
	cri := &hugeCRI{pulled: map[string]*runtimeapi.Image{}}
	endpoint := serveFake(t, cri)
	cp := testbed.StartControlPlane(t)
	const name = "node-blind"
	cp.CreateNode(t, name, nil)
	fleet := &testbed.Fleet{CP: cp, Bin: testbed.BuildWarmer(t)}
	agent := testbed.StartProcess(t, "agent "+name, append([]string{fleet.Bin, "agent", "--kubeconfig", cp.AgentKubeconfig(t, name),
		"--node-name", name, "--container-runtime-endpoint", endpoint, "--kubelet-address=",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, testbed.DefaultAgentFlags...)...)
	ref := "registry.example/team/blind:v1"
	fleet.Create(t, build.ImageWarm("default", "blind", build.Images(ref)))

	testbed.Eventually(t, 60*time.Second, "the pull held: DiskPressure, saying the level cannot be read", func() error {
		img, err := fleet.NodeImage(name, ref)
		if err != nil {
			return err
		}
		if img.Reason != warmv1.ReasonDiskPressure || !strings.Contains(img.Message, "cannot read the image filesystem's level") ||
			!strings.Contains(img.Message, "--image-fs-unknown=pull") {
			return fmt.Errorf("image %s %s: %s", img.State, img.Reason, img.Message)
		}
		return nil
	})
	// Held across passes, not only at first: no pull ever reached the runtime.
	time.Sleep(testbed.DefaultAgent.Resync + testbed.BusyMargin)
	cri.mu.Lock()
	pulled := len(cri.pulled)
	cri.mu.Unlock()
	if pulled != 0 {
		t.Errorf("the runtime pulled %d images while the level was unknown", pulled)
	}
	if agent.Exited() {
		t.Fatalf("the agent exited:\n%s", agent.Log(40))
	}
}
