package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/imagewarm"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestRolloutPassesDeadAgent: with maxPulling 1, the admitted node's
// agent is killed mid-pull. Its last report (Pulling) stands, but its
// Pod stops being Ready, and within AgentDeadAfter the controller (under
// its shipped role, watching the agent Pods of warmer's namespace) counts
// the node as not reporting, names it in silentNodes and gives its slot to
// the next node, which warms.
//
// The bed's simulated nodes have no kubelet, so the test stands in for
// it on one point only: it makes an agent Pod per node and writes its
// Ready condition, True while the agent runs and False once it is killed,
// as the kubelet's readiness probe would (test/cluster runs the real
// kubelet). The agents themselves are the real binary.
func TestRolloutPassesDeadAgent(t *testing.T) {
	const ns = "liveness"
	nodes := []string{"live-1", "live-2", "live-3"}
	// The 16 MB image takes about 16 s through the slow proxies: the
	// first node is still pulling when its agent dies.
	reg, f, _ := slowFleet(t, ns, nodes, testbed.FleetOptions{
		ControllerFlags: []string{"--agent-namespace=" + testbed.SystemNamespace, "--zap-log-level=debug"},
	})
	t.Cleanup(func() {
		if t.Failed() {
			out, err := f.CP.Kubectl(t, "get", "pods", "-n", testbed.SystemNamespace, "--show-labels", "-o", "wide")
			t.Logf("agent Pods (%v):\n%s", err, out)
			out, err = f.CP.Kubectl(t, "--kubeconfig", f.CP.ControllerKubeconfig(t), "get", "pods", "-n", testbed.SystemNamespace, "-l", "app.kubernetes.io/component=agent")
			t.Logf("as the controller (%v):\n%s", err, out)
		}
	})
	for _, n := range nodes {
		agentPodReady(t, f, n, true)
	}
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	app := reg.PushRandom(t, "liveness/app:v1", testbed.ImageOptions{LayerSize: 8 << 20, Layers: 2})
	iw := build.ImageWarm(ns, "one-at-a-time", build.Images(app.Ref))
	one := intstr.FromInt32(1)
	iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: &one}
	f.Create(t, iw)
	order := rolloutOrder(f.ImageWarm(t, ns, iw.Name).UID, nodes)
	first, second := order[0], order[1]
	testbed.Eventually(t, 30*time.Second, first+" pulling", func() error {
		img, err := f.NodeImage(first, app.Ref)
		if err != nil {
			return err
		}
		if img.State != warmv1.ImagePulling {
			return fmt.Errorf("state %s", img.State)
		}
		return nil
	})

	f.Nodes[first].Agent.Kill()
	down := time.Now()
	agentPodReady(t, f, first, false)
	testbed.Eventually(t, imagewarm.AgentDeadAfter+testbed.SettleMargin, "the slot given to "+second, func() error {
		st := f.ImageWarm(t, ns, iw.Name).Status
		if r := st.Rollout; r == nil || r.Admitted < 2 {
			return fmt.Errorf("rollout %+v", st.Rollout)
		}
		return nil
	})
	took := time.Since(down)
	// The Pod's condition keeps its time to the second: the agent counts
	// as down from up to a second before the test's clock says.
	if took < imagewarm.AgentDeadAfter-time.Second {
		t.Errorf("slot given %v after the agent died, before AgentDeadAfter (%v)", took, imagewarm.AgentDeadAfter)
	}
	t.Logf("slot given to %s %v after %s's agent died (bound %v)", second, took.Round(100*time.Millisecond), first, imagewarm.AgentDeadAfter)
	st := f.ImageWarm(t, ns, iw.Name).Status
	if !slices.ContainsFunc(st.SilentNodes, func(s warmv1.SilentNode) bool { return s.Node == first }) || st.Nodes.NotReporting < 1 {
		t.Errorf("nodes %+v, silentNodes %+v: want %s named not reporting", st.Nodes, st.SilentNodes, first)
	}
	testbed.Eventually(t, 60*time.Second, "the image on "+second, func() error { return f.Nodes[second].AllPresent(t, app.Ref) })
}

// agentPodReady labels node's agent Pod in warmer's namespace as the
// agent DaemonSet's (the bed's stand-in Pod, to which the agent's token
// is bound, or a new one), and writes its Ready condition as the kubelet
// would.
func agentPodReady(t *testing.T, f *testbed.Fleet, node string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "warmer-agent-" + node, Namespace: testbed.SystemNamespace, Labels: imagewarm.AgentPodLabels()},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent", Image: testbed.WarmerRepo + ":bed"}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}
	// A Get that finds nothing may leave its object cleared: read into
	// another.
	var found corev1.Pod
	switch err := f.CP.Client.Get(ctx, client.ObjectKeyFromObject(pod), &found); {
	case err == nil:
		if found.Labels == nil {
			found.Labels = map[string]string{}
		}
		maps.Copy(found.Labels, imagewarm.AgentPodLabels())
		if err := f.CP.Client.Update(ctx, &found); err != nil {
			t.Fatal(err)
		}
		pod = &found
	case apierrors.IsNotFound(err):
		if err := f.CP.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := f.CP.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}
