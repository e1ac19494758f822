package testbed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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

// WaitStartedWithoutPull waits for the kubelet's own events to say the
// Pod's image was already present on the node (Pulled, "already present
// on machine"), and fails the test if they say it pulled (Pulling).
func (n *RealNode) WaitStartedWithoutPull(t TB, pod *corev1.Pod) {
	t.Helper()
	Eventually(t, 30*time.Second, "the kubelet saying the image of "+pod.Name+" was there", func() error {
		evs := EventLines(n.PodEvents(t, pod))
		if slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Pulling:") }) {
			t.Fatalf("the kubelet pulled the image of %s: %q", pod.Name, evs)
		}
		if !slices.ContainsFunc(evs, func(e string) bool {
			return strings.HasPrefix(e, "Pulled:") && strings.Contains(e, "already present on machine")
		}) {
			return fmt.Errorf("events %q", evs)
		}
		return nil
	})
}
