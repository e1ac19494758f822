package rollout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
)

// nodes is the size of the shared fleet.
const nodes = 10

var (
	// bed is the shared TB: a controller restarted by a test runs on it,
	// past that test's end.
	bed   = &testbed.Shared{Name: "rollout"}
	fleet *testbed.Fleet
	regs  testbed.Registries
	// controller are the fleet's controller settings: a killed leader's
	// successor leads within controller.TakeOver().
	controller = testbed.DefaultController
)

func TestMain(m *testing.M) {
	if !bed.Start(startBed) {
		os.Exit(1)
	}
	code := m.Run()
	bed.Stop()
	os.Exit(code)
}

// startBed starts the registries, the fleet with the warm gate on, and
// the scheduler, and waits until the gate is armed.
func startBed(t testbed.TB) {
	regs = testbed.StartRegistries(t)
	labels := map[string]map[string]string{}
	for i := range nodes {
		labels[fmt.Sprintf("roll-%02d", i)] = map[string]string{"pool": "web"}
	}
	agent := testbed.DefaultAgent
	agent.BackOffInitial, agent.BackOffMax = 2*time.Second, 4*time.Second
	fleet = testbed.StartFleet(t, labels, testbed.FleetOptions{Agent: &agent, Controller: &controller,
		ControllerFlags: []string{"--warm-gate"}, BeforeController: installWarmGate})
	for name := range fleet.Nodes {
		setCapacity(t, name)
	}
	fleet.CP.StartScheduler(t)
	waitArmed(t, true)
}

// installWarmGate applies config/components/warm-gate's policies and roles
// from the repository, as its overlay would.
func installWarmGate(t testbed.TB, cp *testbed.ControlPlane) {
	dir := filepath.Join(testbed.RepoRoot(t), "config", "components", "warm-gate")
	for _, file := range []string{"gate_policy.yaml", "deadline_policy.yaml", "controller_pods_policy.yaml", "controller_warm_gate_role.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range testbed.DecodeObjects(t, file, string(b)) {
			err := cp.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("rollout-test"), client.ForceOwnership)
			if err != nil {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// setCapacity gives a Node made by the bed what a kubelet would report, so
// the scheduler may place Pods on it.
func setCapacity(t testbed.TB, name string) {
	ctx := context.Background()
	var node corev1.Node
	if err := fleet.CP.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}
	node.Status.Allocatable = node.Status.Capacity
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := fleet.CP.Client.Status().Update(ctx, &node); err != nil {
		t.Fatalf("node %s capacity: %v", name, err)
	}
	// The API server taints a new Node not-ready; without
	// kube-controller-manager, nothing else lifts the taint.
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if err := fleet.CP.Client.Update(ctx, &node); err != nil {
		t.Fatalf("node %s taints: %v", name, err)
	}
}

// waitArmed waits until a new opted-in Pod gets the gate (armed) or not.
func waitArmed(t testbed.TB, armed bool) {
	ns := "arming"
	_ = fleet.CP.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	testbed.Eventually(t, 90*time.Second, fmt.Sprintf("the gate armed: %v", armed), func() error {
		pod := newPod(ns, "probe", "probe", "registry.invalid/probe:v1", "probe")
		pod.GenerateName, pod.Name = "probe-", ""
		if err := fleet.CP.Client.Create(context.Background(), pod); err != nil {
			return err
		}
		_ = fleet.CP.Client.Delete(context.Background(), pod)
		if testbed.HasWarmGate(pod) != armed {
			var lease coordinationv1.Lease
			err := fleet.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: testbed.SystemNamespace, Name: gate.ArmingLease}, &lease)
			return fmt.Errorf("probe Pod gates %v (arming Lease: %w); controller:\n%s", pod.Spec.SchedulingGates, err, fleet.Controller.Log(15))
		}
		return nil
	})
}

// newPod is a Pod as a ReplicaSet of a template labelled for the gate
// (iw: the ImageWarm; "" leaves it ungated) would create it.
func newPod(ns, name, app, image, iw string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}},
			NodeSelector: map[string]string{"pool": "web"}}}
	if iw != "" {
		pod.Labels[gate.LabelImageWarm] = iw
	}
	return pod
}
