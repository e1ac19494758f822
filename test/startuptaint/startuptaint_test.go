// Package startuptaint tests the agent's startup taint on a real node whose
// kubelet registers it with readiness.k8s.io/images-warm:NoSchedule
// (registerWithTaints), with warmer installed from config/default with
// config/components/readiness-taint and the agent running in its DaemonSet
// with its real Pod token: a Pod that needs a warmed image stays Pending
// while the node is tainted, then starts without a pull; an image that
// cannot be pulled holds the taint only until the agent's
// --startup-taint-deadline. The Node's ImagesWarm condition follows the
// images throughout.
package startuptaint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	// mirrored is the registry name pods and ImageWarms use; the node
	// serves it from the test registry.
	mirrored = "ghcr.io"
	// app is the image warmed before any Pod may land; missing is one the
	// registry does not have.
	app     = mirrored + "/team/app:v1"
	missing = mirrored + "/team/missing:v1"
	ns      = "default"
	// taintKey is the startup taint under readiness.k8s.io/, as
	// config/components/readiness-taint sets it (the default key's policy
	// is held by test/deploy).
	taintKey = "readiness.k8s.io/images-warm"
)

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestStartupTaint starts one tainted node and installs warmer on it. The
// warm path first: an ImageWarm with startupTaint holds the node until its
// image is present, a Pod waits unscheduled meanwhile, then runs from the
// warmed image. Then the deadline path on the same node: the taint put
// back (as an operator would), an ImageWarm whose image does not exist,
// and the agent rolled to a deadline a little after now (counted, like
// every deadline, from the Node's creation): the new agent holds the taint
// until then, removes it, and says so with Warning events.
func TestStartupTaint(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "startuptaint"})
	reg.Push(t, "team/app:v1", testbed.AppImage(t))
	n := testbed.StartNode(t, testbed.NodeOptions{
		Mirrors: map[string]string{mirrored: reg.Host},
		KubeletConfig: map[string]any{"registerWithTaints": []map[string]string{
			{"key": taintKey, "effect": "NoSchedule"},
		}},
	})
	if !tainted(t, n) {
		t.Fatalf("the kubelet registered node %s without taint %s", n.Name, taintKey)
	}
	// The Pod comes before warmer, which then stays installed for both.
	pod := waitingPod(t, n)
	// startupTaint is a cluster-wide lever: the operator marks the
	// namespaces that may use it (config/policy/imagewarm_levers_policy.yaml).
	kubectl(t, n, "label", "namespace", ns, "warmer.dev/cluster-levers=allowed", "--overwrite")
	install(t, n)
	t.Run("Warm", func(t *testing.T) { testWarm(t, n, pod) })
	t.Run("Deadline", func(t *testing.T) { testDeadline(t, n) })
}

// waitingPod creates the ImageWarm that holds the taint and a Pod of its
// image, before warmer is installed: the scheduler keeps the Pod off the
// tainted node.
func waitingPod(t *testing.T, n *testbed.RealNode) *corev1.Pod {
	iw := build.ImageWarm(ns, "app", build.Images(app))
	iw.Spec.StartupTaint = true
	create(t, n, iw)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: corev1.PodSpec{
			// The test bed's pods use the host's network (no pod network).
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: app}},
		},
	}
	create(t, n, pod)
	testbed.Eventually(t, time.Minute, "the scheduler finding no node for the pod", func() error {
		p := getPod(t, n, pod)
		c := podCondition(p, corev1.PodScheduled)
		if p.Spec.NodeName != "" {
			t.Fatalf("pod bound to %s while the node is tainted", p.Spec.NodeName)
		}
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			return fmt.Errorf("PodScheduled %+v", c)
		}
		return nil
	})
	return pod
}

// testWarm: the agent pulls the image, removes the taint, and the kubelet
// starts the waiting Pod from the image already there.
func testWarm(t *testing.T, n *testbed.RealNode, pod *corev1.Pod) {
	testbed.Eventually(t, 2*time.Minute, "the agent removing the startup taint", func() error {
		if p := getPod(t, n, pod); p.Spec.NodeName != "" && tainted(t, n) {
			t.Fatalf("pod bound to %s while the node is tainted", p.Spec.NodeName)
		}
		if tainted(t, n) {
			return fmt.Errorf("still tainted; NodeWarm condition %+v", taintCondition(t, n))
		}
		return nil
	})
	waitTaintReleased(t, n, warmv1.ReasonTaintRemoved)
	wantNodeEvent(t, n, warmv1.ReasonStartupTaintRemoved, corev1.EventTypeNormal)
	waitImagesWarm(t, n, corev1.ConditionTrue, warmv1.ReasonImagesPresent)

	testbed.Eventually(t, 2*time.Minute, "the pod running", func() error {
		if p := getPod(t, n, pod); p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s; events %q", p.Status.Phase, testbed.EventLines(n.PodEvents(t, pod)))
		}
		return nil
	})
	n.WaitStartedWithoutPull(t, pod)
}

// testDeadline: the new agent finds the taint, holds it for an image that
// cannot come, and removes it at the deadline. The agent's own token may
// remove that taint and change nothing else of the Node.
func testDeadline(t *testing.T, n *testbed.RealNode) {
	iw := build.ImageWarm(ns, "broken", build.Images(missing))
	iw.Spec.StartupTaint = true
	create(t, n, iw)
	retaint(t, n)
	created := getNode(t, n).CreationTimestamp.Time
	// Long enough for the agent to roll and report Waiting first.
	deadline := time.Since(created).Round(time.Second) + 45*time.Second
	setDeadline(t, n, deadline)
	waitAgent(t, n)

	testbed.Eventually(t, time.Minute, "the new agent holding the taint", func() error {
		c := taintCondition(t, n)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != warmv1.ReasonTaintWaiting {
			return fmt.Errorf("NodeWarm condition %+v", c)
		}
		if !strings.Contains(c.Message, ns+"/broken") || strings.Contains(c.Message, ns+"/app") {
			t.Errorf("Waiting names %q, want %s/broken only", c.Message, ns)
		}
		return nil
	})
	checkAgentToken(t, n)
	c := waitImagesWarm(t, n, corev1.ConditionFalse, warmv1.ReasonImagesMissing)
	// Its message does not move with each image (each move is a Node
	// write): it counts the ImageWarms, and names no image.
	if want := "Images of the 2 ImageWarms with startupTaint are missing"; !strings.HasPrefix(c.Message, want) || strings.Contains(c.Message, missing) {
		t.Errorf("ImagesWarm message %q, want %q and no image named", c.Message, want)
	}

	testbed.Eventually(t, deadline+time.Minute, "the agent removing the taint at its deadline", func() error {
		if tainted(t, n) {
			return fmt.Errorf("still tainted; NodeWarm condition %+v", taintCondition(t, n))
		}
		return nil
	})
	if early := time.Until(created.Add(deadline)); early > time.Second {
		t.Errorf("taint removed %v before its deadline", early)
	}
	waitTaintReleased(t, n, warmv1.ReasonTaintDeadlineExceeded)
	wantNodeEvent(t, n, warmv1.ReasonStartupTaintDeadline, corev1.EventTypeWarning)
	// The deadline frees the node, not the images: the condition still
	// says one is missing, beside the kubelet's own, which it leaves be.
	waitImagesWarm(t, n, corev1.ConditionFalse, warmv1.ReasonImagesMissing)
	if ready := nodeCondition(t, n, corev1.NodeReady); ready == nil || ready.Status != corev1.ConditionTrue {
		t.Errorf("the kubelet's Ready condition %+v beside ImagesWarm", ready)
	}
	testbed.Eventually(t, 30*time.Second, "a deadline warning on ImageWarm broken", func() error {
		for _, e := range events(t, n) {
			if e.Regarding.Kind == "ImageWarm" && e.Regarding.Name == "broken" && e.Reason == warmv1.ReasonStartupTaintDeadline && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events(t, n)))
	})
}

// checkAgentToken makes, with the agent Pod's own token, while the node is
// tainted, the removal the agent makes (a dry run: admitted) and two it
// must not make (refused by the admission policy).
func checkAgentToken(t *testing.T, n *testbed.RealNode) {
	t.Helper()
	c := agentClient(t, n)
	node := getNode(t, n)
	patch := func(extra string) error {
		kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.Key == taintKey })
		was, _ := json.Marshal(node.Spec.Taints)
		now, _ := json.Marshal(kept)
		p := fmt.Sprintf(`[{"op":"test","path":"/spec/taints","value":%s},{"op":"replace","path":"/spec/taints","value":%s}%s]`, was, now, extra)
		return c.Patch(context.Background(), node.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(p)), client.DryRunAll)
	}
	if err := patch(""); err != nil {
		t.Errorf("the agent's token removing its startup taint (dry run): %v", err)
	}
	for name, extra := range map[string]string{
		"cordoning":          `,{"op":"add","path":"/spec/unschedulable","value":true}`,
		"labelling its node": `,{"op":"add","path":"/metadata/labels/example.com~1pwned","value":"yes"}`,
	} {
		err := patch(extra)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "warmer-agent-own-node-taint") {
			t.Errorf("the agent's token removing its startup taint and %s: %v, want Forbidden by warmer-agent-own-node-taint", name, err)
		}
	}
}

func create(t *testing.T, n *testbed.RealNode, obj client.Object) {
	t.Helper()
	if err := n.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func getNode(t *testing.T, n *testbed.RealNode) *corev1.Node {
	t.Helper()
	var node corev1.Node
	if err := n.Client.Get(context.Background(), client.ObjectKey{Name: n.Name}, &node); err != nil {
		t.Fatal(err)
	}
	return &node
}

func tainted(t *testing.T, n *testbed.RealNode) bool {
	t.Helper()
	return slices.ContainsFunc(getNode(t, n).Spec.Taints, func(t corev1.Taint) bool { return t.Key == taintKey })
}

// retaint puts the startup taint back on the node, as the admin.
func retaint(t *testing.T, n *testbed.RealNode) {
	t.Helper()
	kubectl(t, n, "taint", "node", n.Name, taintKey+":NoSchedule")
	if !tainted(t, n) {
		t.Fatal("the taint did not come back")
	}
}

// waitTaintReleased waits for the NodeWarm's StartupTaint condition to say
// False with reason. The agent removes the taint and then writes its
// NodeWarm in the same pass, so the condition may come a moment after the
// Node shows the taint gone.
func waitTaintReleased(t *testing.T, n *testbed.RealNode, reason string) {
	t.Helper()
	testbed.Eventually(t, 30*time.Second, "the NodeWarm saying StartupTaint False "+reason, func() error {
		if c := taintCondition(t, n); c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("NodeWarm condition %+v", c)
		}
		return nil
	})
}

// waitImagesWarm waits for the Node's ImagesWarm condition to have status
// and reason, and returns it.
func waitImagesWarm(t *testing.T, n *testbed.RealNode, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
	t.Helper()
	var got corev1.NodeCondition
	testbed.Eventually(t, time.Minute, "the Node saying ImagesWarm "+string(status)+" "+reason, func() error {
		c := nodeCondition(t, n, warmv1.ConditionImagesWarm)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("ImagesWarm %+v", c)
		}
		got = *c
		return nil
	})
	return got
}

// nodeCondition is the Node's condition of type typ, or nil.
func nodeCondition(t *testing.T, n *testbed.RealNode, typ corev1.NodeConditionType) *corev1.NodeCondition {
	t.Helper()
	for _, c := range getNode(t, n).Status.Conditions {
		if c.Type == typ {
			return &c
		}
	}
	return nil
}

// taintCondition is the NodeWarm's StartupTaint condition, or nil.
func taintCondition(t *testing.T, n *testbed.RealNode) *metav1.Condition {
	t.Helper()
	var nw warmv1.NodeWarm
	if err := n.Client.Get(context.Background(), client.ObjectKey{Name: n.Name}, &nw); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionStartupTaint)
}

func getPod(t *testing.T, n *testbed.RealNode, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := n.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// events are the agent's (events.k8s.io) events in the test's namespace,
// where it records those about ImageWarms and the (cluster-scoped) Node.
func events(t *testing.T, n *testbed.RealNode) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := n.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// wantNodeEvent waits for an event of the agent about the Node.
func wantNodeEvent(t *testing.T, n *testbed.RealNode, reason, typ string) {
	t.Helper()
	testbed.Eventually(t, 30*time.Second, "a "+reason+" event on the Node", func() error {
		var seen []string
		for _, e := range events(t, n) {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == n.Name && e.Reason == reason && e.Type == typ {
				return nil
			}
			seen = append(seen, e.Regarding.Kind+" "+e.Reason)
		}
		return fmt.Errorf("events %q", seen)
	})
}
