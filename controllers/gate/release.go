package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// release records the decision on the Pod and removes the gate: the
// condition first, so that a controller stopped between the two writes
// finds the gate still there and decides again.
func (r *Reconciler) release(ctx context.Context, pod *corev1.Pod, d Decision) error {
	if err := r.setCondition(ctx, pod, d); err != nil {
		return fmt.Errorf("setting condition %s: %w", ConditionWarm, err)
	}
	if err := r.removeGate(ctx, pod); err != nil {
		return fmt.Errorf("removing scheduling gate %s: %w", GateName, err)
	}
	if !d.Warm {
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, d.Reason, "ReleaseGate", "%s", d.Message)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Released the warm gate", "pod", client.ObjectKeyFromObject(pod), "reason", d.Reason)
	return nil
}

// setCondition writes the warmer.dev/Warm condition with a strategic merge
// patch of the status, which merges conditions by type.
func (r *Reconciler) setCondition(ctx context.Context, pod *corev1.Pod, d Decision) error {
	status := corev1.ConditionFalse
	if d.Warm {
		status = corev1.ConditionTrue
	}
	cond := corev1.PodCondition{Type: ConditionWarm, Status: status, Reason: d.Reason, Message: d.Message,
		LastTransitionTime: metav1.NewTime(r.Clock.Now())}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	return r.Client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch))
}

// removeGate removes the gate with a JSON patch that first tests the gate
// is where it was read: a Pod changed since then is refused, not damaged.
func (r *Reconciler) removeGate(ctx context.Context, pod *corev1.Pod) error {
	i := slices.IndexFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/spec/schedulingGates/%d", i)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path + "/name", "value": GateName},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, patch))
}
