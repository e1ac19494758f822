package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

var (
	warmingTaint = corev1.Taint{Key: DefaultStartupTaintKey, Effect: corev1.TaintEffectNoSchedule}
	gpuTaint     = corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	lateTaint    = corev1.Taint{Key: "example.com/late", Value: "yes", Effect: corev1.TaintEffectNoExecute}
)

// TestRemoveStartupTaint removes the startup taint on a real API server
// from a Node the agent read before someone else changed its taints: the
// JSON patch's test fails, and the agent patches again from a fresh read,
// so the other change stays.
func TestRemoveStartupTaint(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	a := &NodeAgent{Client: cp.Client, APIReader: cp.Client, StartupTaintKey: DefaultStartupTaintKey}
	a.init()
	ctx := context.Background()

	t.Run("a taint added meanwhile stays", func(t *testing.T) {
		stale := taintedNode(t, cp, "added", gpuTaint, warmingTaint)
		setNodeTaints(t, cp, stale.Name, gpuTaint, warmingTaint, lateTaint)
		if err := a.removeStartupTaint(ctx, stale); err != nil {
			t.Fatal(err)
		}
		if got := nodeTaints(t, cp, stale.Name); !taintsEqual(got, []corev1.Taint{gpuTaint, lateTaint}) {
			t.Errorf("taints %v, want %v and %v", got, gpuTaint, lateTaint)
		}
	})
	t.Run("already removed by someone else", func(t *testing.T) {
		stale := taintedNode(t, cp, "gone", warmingTaint, gpuTaint)
		setNodeTaints(t, cp, stale.Name, gpuTaint)
		if err := a.removeStartupTaint(ctx, stale); err != nil {
			t.Fatal(err)
		}
		if got := nodeTaints(t, cp, stale.Name); !taintsEqual(got, []corev1.Taint{gpuTaint}) {
			t.Errorf("taints %v, want %v", got, gpuTaint)
		}
	})
	t.Run("refused: the plan's removal events dropped, the condition says so", func(t *testing.T) {
		gone := taintedNode(t, cp, "deleted", warmingTaint)
		if err := cp.Client.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
		out := plan.Output{RemoveTaint: true, Events: []plan.Event{{Reason: warmv1.ReasonStartupTaintRemoved}, {Reason: warmv1.ReasonWarmed}}}
		if err := a.applyTaint(ctx, gone, &out); err == nil {
			t.Fatal("removing the taint of a deleted Node succeeded")
		}
		if len(out.Events) != 1 || out.Events[0].Reason != warmv1.ReasonWarmed {
			got := out.Events
			t.Errorf("events %+v, want only the unrelated Warmed", got)
		}
		c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionStartupTaint)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != warmv1.ReasonTaintRemoveFailed {
			t.Errorf("condition %+v, want True %s", c, warmv1.ReasonTaintRemoveFailed)
		}
	})
}

// taintedNode creates a Node with taints and returns it as read then.
func taintedNode(t *testing.T, cp *testbed.ControlPlane, name string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	n := cp.CreateNode(t, name, nil)
	n.Spec.Taints = taints
	if err := cp.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return n.DeepCopy()
}

func setNodeTaints(t *testing.T, cp *testbed.ControlPlane, name string, taints ...corev1.Taint) {
	t.Helper()
	var n corev1.Node
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if err := cp.Client.Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
}

func nodeTaints(t *testing.T, cp *testbed.ControlPlane, name string) []corev1.Taint {
	t.Helper()
	var n corev1.Node
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	return n.Spec.Taints
}

func taintsEqual(a, b []corev1.Taint) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Taint) bool { return x.MatchTaint(&y) && x.Value == y.Value })
}
