package agent

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func TestResolvedChangedPredicate(t *testing.T) {
	a := &warmv1.ImageWarm{Spec: warmv1.ImageWarmSpec{ImagesFrom: &warmv1.ImagesFrom{}}}
	b := a.DeepCopy()
	b.Status.Resolved = &warmv1.ResolvedImages{Hash: "0123456789abcdef"}
	c := b.DeepCopy()
	c.Status.Nodes.Ready = 3 // a progress write: no new set
	if !resolvedChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: b}) {
		t.Error("a new resolved set did not pass")
	}
	if resolvedChanged.Update(event.UpdateEvent{ObjectOld: b, ObjectNew: c}) {
		t.Error("a progress write passed")
	}
}
