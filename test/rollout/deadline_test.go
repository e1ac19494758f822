package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
)

// brokenWarm makes namespace ns and an ImageWarm of it for an image no
// registry has, and returns the image: its Pods can never be warm.
func brokenWarm(t *testing.T, ns, name string) string {
	image := regs.Anon.Ref(ns + "/missing:v1")
	fleet.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	fleet.Create(t, &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: warmv1.ImageWarmSpec{
		Images:       []warmv1.ImageReference{warmv1.ImageReference(image)},
		NodeSelector: &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"pool": "web"}}}})
	return image
}

// createGated creates n Pods naming ImageWarm iw with the deadline, and
// checks that each was created gated.
func createGated(t *testing.T, ns, iw, image, deadline string, n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		pod := newPod(ns, fmt.Sprintf("%s-%d", iw, i), iw, image, iw)
		pod.Annotations = map[string]string{gate.AnnotationDeadline: deadline}
		if err := fleet.CP.Client.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if !testbed.HasWarmGate(pod) {
			t.Fatalf("Pod %s created without the gate: %v", pod.Name, pod.Spec.SchedulingGates)
		}
		pods = append(pods, pod)
	}
	return pods
}

// released waits until every Pod's gate is gone, and checks the condition
// and the event say reason.
func released(t *testing.T, pods []*corev1.Pod, within time.Duration, reason string) {
	testbed.Eventually(t, within, "gates released with "+reason, func() error {
		for _, p := range pods {
			var got corev1.Pod
			if err := fleet.CP.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
				return err
			}
			if testbed.HasWarmGate(&got) {
				return fmt.Errorf("%s still gated", p.Name)
			}
			if c := testbed.WarmCondition(&got); c == nil || c.Status != corev1.ConditionFalse || c.Reason != reason {
				return fmt.Errorf("%s condition %+v", p.Name, c)
			}
			if len(fleet.Events(t, p.Namespace, p.Name, reason)) == 0 {
				return fmt.Errorf("%s has no %s event", p.Name, reason)
			}
		}
		return nil
	})
}

// stillGated fails if any Pod lost its gate.
func stillGated(t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		var got corev1.Pod
		if err := fleet.CP.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if !testbed.HasWarmGate(&got) {
			t.Fatalf("%s released early: condition %+v", p.Name, testbed.WarmCondition(&got))
		}
	}
}

// TestGateDeadline: Pods whose image cannot be pulled wait for their
// deadline, not less, then proceed cold with the condition and a Warning
// event.
func TestGateDeadline(t *testing.T) {
	const ns, deadline = "deadline", 20 * time.Second
	image := brokenWarm(t, ns, "broken")
	pods := createGated(t, ns, "broken", image, deadline.String(), 3)
	time.Sleep(deadline - 5*time.Second)
	stillGated(t, pods)
	released(t, pods, 30*time.Second, gate.ReasonDeadlineExceeded)
	for _, p := range pods {
		var got corev1.Pod
		if err := fleet.CP.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if at := testbed.WarmCondition(&got).LastTransitionTime; at.Before(&metav1.Time{Time: got.CreationTimestamp.Add(deadline)}) {
			t.Errorf("%s released at %v, before its deadline (created %v)", p.Name, at, got.CreationTimestamp)
		}
	}
}

// TestGateImageWarmDeleted: deleting the ImageWarm a Pod waits for
// releases it at once.
func TestGateImageWarmDeleted(t *testing.T) {
	const ns = "deleted"
	image := brokenWarm(t, ns, "gone")
	pods := createGated(t, ns, "gone", image, "30m", 2)
	time.Sleep(3 * time.Second)
	stillGated(t, pods)
	if err := fleet.CP.Client.Delete(context.Background(), &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	released(t, pods, 20*time.Second, gate.ReasonImageWarmNotFound)
}
