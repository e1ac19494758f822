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
	if !RolloutAdmits(iw, "n") {
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
	for _, c := range cases {
		iw.Spec.ImagesFrom, iw.Status.Resolved = nil, nil
		if c.hash != "" {
			iw.Spec.ImagesFrom = &ImagesFrom{}
			iw.Status.Resolved = &ResolvedImages{Hash: c.hash}
		}
		iw.Status.Rollout = c.status
		if got := RolloutAdmits(iw, "n"); got != c.want {
			t.Errorf("%s: admitted %v, want %v", c.name, got, c.want)
		}
	}
}
