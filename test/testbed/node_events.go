package testbed

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodEvents are the core/v1 events (the kubelet's kind) about the pod.
func (n *RealNode) PodEvents(t TB, pod *corev1.Pod) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := n.Client.List(context.Background(), &list, client.InNamespace(pod.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod.Name {
			out = append(out, e)
		}
	}
	return out
}

// EventLines renders events as "Reason: message", for checks and failure
// messages.
func EventLines(evs []corev1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Reason + ": " + e.Message
	}
	return out
}
