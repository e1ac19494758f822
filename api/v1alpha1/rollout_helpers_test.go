package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestRolloutPlaceIsStable pins the hash: agents of one release and a
// controller of another must agree on every node's place.
func TestRolloutPlaceIsStable(t *testing.T) {
	cases := []struct {
		uid, node string
		want      uint32
	}{
		{"", "", 0x2a0c975e}, // FNV-1a of "/", worked out by hand
		{"uid-1", "node-a", 0x516ab762},
	}
	for _, c := range cases {
		if got := RolloutPlace(types.UID(c.uid), c.node); got != c.want {
			t.Errorf("RolloutPlace(%q, %q) = %#x, want %#x", c.uid, c.node, got, c.want)
		}
	}
	if RolloutPlace("uid-1", "node-a") == RolloutPlace("uid-2", "node-a") {
		t.Error("two ImageWarms give a node the same place")
	}
}

func TestRolloutAdmits(t *testing.T) {
	iw := &ImageWarm{}
	iw.UID, iw.Generation = "u", 2
	place := int64(RolloutPlace("u", "n"))
	if !RolloutAdmits(iw, nil, "n") {
		t.Fatal("without spec.rollout a node must be admitted")
	}
	iw.Spec.Rollout = &Rollout{MaxPulling: &intstr.IntOrString{IntVal: 1}}
	cases := []struct {
		name   string
		status *RolloutStatus
		hash   string
		want   bool
	}{
		{"no status yet", nil, "", false},
		{"older generation", &RolloutStatus{Generation: 1, AdmittedBelow: AdmitAll}, "", false},
		{"other resolved images", &RolloutStatus{Generation: 2, Resolved: "ab", AdmittedBelow: AdmitAll}, "cd", false},
		{"place at the bound", &RolloutStatus{Generation: 2, AdmittedBelow: place}, "", false},
		{"place below the bound", &RolloutStatus{Generation: 2, AdmittedBelow: place + 1}, "", true},
		{"every node", &RolloutStatus{Generation: 2, Resolved: "ab", AdmittedBelow: AdmitAll}, "ab", true},
	}
	bound := func(uid string, gen, below int64) *RolloutBound {
		return &RolloutBound{Spec: RolloutBoundSpec{ImageWarmUID: uid, Generation: gen, AdmittedBelow: below}}
	}
	atPlace := &RolloutStatus{Generation: 2, AdmittedBelow: place}
	withBound := []struct {
		name   string
		status *RolloutStatus
		bound  *RolloutBound
		want   bool
	}{
		{"bound object raises the status", atPlace, bound("u", 2, place+1), true},
		{"bound object alone", nil, bound("u", 2, place+1), true},
		{"bound object lower than the status", &RolloutStatus{Generation: 2, AdmittedBelow: place + 1}, bound("u", 2, 0), true},
		{"bound object of a deleted ImageWarm", atPlace, bound("old", 2, AdmitAll), false},
		{"bound object of an older generation", atPlace, bound("u", 1, AdmitAll), false},
	}
	for _, c := range cases {
		iw.Spec.ImagesFrom, iw.Status.Resolved = nil, nil
		if c.hash != "" {
			iw.Spec.ImagesFrom = &ImagesFrom{}
			iw.Status.Resolved = &ResolvedImages{Hash: c.hash}
		}
		iw.Status.Rollout = c.status
		if got := RolloutAdmits(iw, nil, "n"); got != c.want {
			t.Errorf("%s: admitted %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range withBound {
		iw.Spec.ImagesFrom, iw.Status.Resolved, iw.Status.Rollout = nil, nil, c.status
		if got := RolloutAdmits(iw, c.bound, "n"); got != c.want {
			t.Errorf("%s: admitted %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRaiseRollout(t *testing.T) {
	iw := &ImageWarm{}
	iw.UID, iw.Generation = "u", 3
	iw.Spec.Rollout = &Rollout{Canary: true}
	b := &RolloutBound{Spec: RolloutBoundSpec{ImageWarmUID: "u", Generation: 3, AdmittedBelow: 40}}
	iw.Status.Rollout = &RolloutStatus{Generation: 3, AdmittedBelow: 10, Waiting: 7}
	RaiseRollout(iw, b)
	if r := iw.Status.Rollout; r.AdmittedBelow != 40 || r.Waiting != 7 || r.Generation != 3 {
		t.Errorf("raised to %+v, want bound 40 and the rest kept", r)
	}
	iw.Status.Rollout = &RolloutStatus{Generation: 2, AdmittedBelow: AdmitAll, Waiting: 7}
	RaiseRollout(iw, b)
	if r := iw.Status.Rollout; r.AdmittedBelow != 40 || r.Waiting != 0 || r.Generation != 3 {
		t.Errorf("over an older generation: %+v, want generation 3, bound 40, no counts", r)
	}
	b.Spec.Generation = 2
	iw.Status.Rollout = nil
	RaiseRollout(iw, b)
	if iw.Status.Rollout != nil {
		t.Errorf("a bound of another generation raised the rollout to %+v", iw.Status.Rollout)
	}
}
