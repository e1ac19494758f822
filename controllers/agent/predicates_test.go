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

func TestAdmittedNowPredicate(t *testing.T) {
	a := &NodeAgent{NodeName: "node-7"}
	p := a.admittedNow()
	place := int64(warmv1.RolloutPlace("u1", "node-7"))
	bound := func(uid string, gen, below int64) *warmv1.RolloutBound {
		return &warmv1.RolloutBound{Spec: warmv1.RolloutBoundSpec{ImageWarmUID: uid, Generation: gen, AdmittedBelow: below}}
	}
	for _, c := range []struct {
		name     string
		old, new *warmv1.RolloutBound
		want     bool
	}{
		{"created below the node", nil, bound("u1", 1, place), false},
		{"created admitting the node", nil, bound("u1", 1, place+1), true},
		{"raised to admit the node", bound("u1", 1, place), bound("u1", 1, place+1), true},
		{"raised, the node admitted before", bound("u1", 1, place+1), bound("u1", 1, place+9), false},
		{"raised, still below the node", bound("u1", 1, 0), bound("u1", 1, place), false},
		{"a new generation admitting the node", bound("u1", 1, warmv1.AdmitAll), bound("u1", 2, place+1), true},
	} {
		var got bool
		if c.old == nil {
			got = p.Create(event.CreateEvent{Object: c.new})
		} else {
			got = p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new})
		}
		if got != c.want {
			t.Errorf("%s: passed %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRolloutChangedPredicate(t *testing.T) {
	a := &NodeAgent{NodeName: "node-7"}
	p := a.rolloutChanged()
	place := int64(warmv1.RolloutPlace("u1", "node-7"))
	warm := func(below int64, waiting int32) *warmv1.ImageWarm {
		iw := &warmv1.ImageWarm{Spec: warmv1.ImageWarmSpec{Rollout: &warmv1.Rollout{Canary: true}}}
		iw.UID, iw.Generation = "u1", 1
		iw.Status.Rollout = &warmv1.RolloutStatus{Generation: 1, AdmittedBelow: below, Waiting: waiting}
		return iw
	}
	for _, c := range []struct {
		name     string
		old, new *warmv1.ImageWarm
		want     bool
	}{
		{"the bound reaches the node", warm(place, 5), warm(place+1, 4), true},
		{"the bound moves below the node", warm(0, 5), warm(place, 4), false},
		{"the bound moves past an admitted node", warm(place+1, 5), warm(place+7, 4), false},
		{"counts alone", warm(place+1, 5), warm(place+1, 3), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: passed %v, want %v", c.name, got, c.want)
		}
	}
}
