package testbed

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/warmer-dev/warmer/controllers/gate"
)

// HasWarmGate says whether the Pod carries warmer's scheduling gate.
func HasWarmGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == gate.GateName {
			return true
		}
	}
	return false
}

// WarmCondition is the Pod's warmer.dev/Warm condition, which the
// controller sets as it removes the gate, or nil.
func WarmCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == gate.ConditionWarm {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
