package gatenode

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const (
	// mirrored is the registry name Pods and ImageWarms use; the node
	// reaches the test registry for it through a slow link.
	mirrored = "ghcr.io"
	ns       = "default"
	tag      = "v0.0.0-gatenode"
	// linkRate is each connection's rate to the registry: an image of
	// extra bytes takes seconds to arrive, longer than the scheduler and
	// the kubelet take to start an ungated Pod.
	linkRate = 1 << 20
	extra    = 6 * testbed.MB
)

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestGateOnRealNode installs warmer with the warm gate on a real node,
// then creates, at once, two ImageWarms of images the node has not got
// (each asking for the node's warm label) and a Deployment for each
// image: "app" opted in to the gate, "control" not. The app Pod stays
// gated and unbound while its image is missing, is released warm once the
// agent has it, and the kubelet starts it saying the image was already
// present, with the Node's warm label and ImagesWarm condition set. The
// control Pod, created in the same instant, is bound at once and the
// kubelet pulls its image itself: without the gate, the Pod races the
// warm.
func TestGateOnRealNode(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "gatenode"})
	reg.Push(t, "team/app:v1", slowImage(t))
	reg.Push(t, "team/control:v1", slowImage(t))
	link := faults.StartSlowProxy(t, reg.Host, linkRate)
	n := testbed.StartNode(t, testbed.NodeOptions{Mirrors: map[string]string{mirrored: link.Host}})
	// nodeLabel and startupTaint are cluster levers the operator allows
	// per namespace (config/policy/imagewarm_levers_policy.yaml).
	kubectl(t, n, "label", "namespace", ns, "warmer.dev/cluster-levers=allowed", "--overwrite")
	testbed.InstallOnNode(t, n, tag, "config/components/warm-gate")
	testbed.WaitGateArmed(t, n.ControlPlane, ns)

	app, control := mirrored+"/team/app:v1", mirrored+"/team/control:v1"
	for name, image := range map[string]string{"app": app, "control": control} {
		iw := build.ImageWarm(ns, name, build.Images(image))
		// startupTaint makes the Node's ImagesWarm condition follow this
		// image; the node has no taint for it to hold.
		iw.Spec.NodeLabel, iw.Spec.StartupTaint = true, name == "app"
		create(t, n, iw)
	}
	create(t, n, deployment("app", app, true))
	create(t, n, deployment("control", control, false))

	pod := heldWhileCold(t, n, "app", app)
	waitRunning(t, n, pod)
	n.WaitStartedWithoutPull(t, pod)
	if c := testbed.WarmCondition(pod); c == nil || c.Status != corev1.ConditionTrue || c.Reason != gate.ReasonWarm {
		t.Errorf("Pod %s condition %s: %+v", pod.Name, gate.ConditionWarm, c)
	}
	nodeSignals(t, n)

	// The control: no gate, so the scheduler binds it at once and the
	// kubelet, finding no image, pulls it.
	ctl := waitRunning(t, n, firstPod(t, n, "control"))
	if testbed.HasWarmGate(ctl) || testbed.WarmCondition(ctl) != nil {
		t.Errorf("the ungated control Pod was gated: gates %v", ctl.Spec.SchedulingGates)
	}
	if evs := testbed.EventLines(n.PodEvents(t, ctl)); !slices.ContainsFunc(evs, prefixed("Pulling:")) {
		t.Errorf("the ungated control Pod started without the kubelet pulling: %q; the bed does not show the race the gate closes", evs)
	}
}

// slowImage is a runnable image of its own (testbed.AppImage) with a
// random layer of extra bytes, which the slow link takes seconds to carry.
func slowImage(t *testing.T) v1.Image {
	layers, err := testbed.RandomImage(t, testbed.ImageOptions{LayerSize: extra}).Layers()
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(testbed.AppImage(t), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// heldWhileCold waits for the Deployment's Pod and, until the gate goes,
// checks on every look that the Pod is gated and unbound whenever the
// node has not got its image. It returns the released Pod, and fails if
// the Pod was never seen gated while the image was missing (the check
// would then have proved nothing).
func heldWhileCold(t *testing.T, n *testbed.RealNode, app, image string) *corev1.Pod {
	t.Helper()
	pod := firstPod(t, n, app)
	sawCold := false
	testbed.Poll(t, 100*time.Millisecond, 2*time.Minute, "the gate released", func() error {
		p := getPod(t, n, pod)
		present := imagePresent(t, n, image)
		switch {
		case !present && (!testbed.HasWarmGate(p) || p.Spec.NodeName != ""):
			t.Fatalf("Pod %s ungated (gates %v) or bound (%q) while its image is missing", p.Name, p.Spec.SchedulingGates, p.Spec.NodeName)
		case !present:
			sawCold = true
		}
		pod = p
		if testbed.HasWarmGate(p) {
			return fmt.Errorf("gated; image present: %v", present)
		}
		return nil
	})
	if !sawCold {
		t.Fatalf("Pod %s never seen gated while its image was missing", pod.Name)
	}
	return pod
}

// nodeSignals checks the Node's warm label for ImageWarm app and its
// ImagesWarm condition.
func nodeSignals(t *testing.T, n *testbed.RealNode) {
	t.Helper()
	key := warmv1.NodeLabelKey(ns, "app")
	testbed.Eventually(t, 30*time.Second, "the Node's warm label and ImagesWarm", func() error {
		node := getNode(t, n)
		if node.Labels[key] != "true" {
			return fmt.Errorf("label %s=%q", key, node.Labels[key])
		}
		for _, c := range node.Status.Conditions {
			if c.Type == warmv1.ConditionImagesWarm {
				if c.Status != corev1.ConditionTrue || c.Reason != warmv1.ReasonImagesPresent {
					return fmt.Errorf("ImagesWarm %+v", c)
				}
				return nil
			}
		}
		return fmt.Errorf("no ImagesWarm condition")
	})
}

func prefixed(p string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, p) }
}
