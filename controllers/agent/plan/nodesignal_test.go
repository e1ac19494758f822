package plan

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

func labelled(iw warmv1.ImageWarm) warmv1.ImageWarm {
	iw.Spec.NodeLabel = true
	return iw
}

// TestPlanNodeSignals checks the warm labels and the ImagesWarm condition
// a pass decides.
func TestPlanNodeSignals(t *testing.T) {
	web := labelled(warm("team-a", "web", nil, imgA))
	both := labelled(warm("team-b", "both", nil, imgA, imgB))
	plain := warm("team-a", "plain", nil, imgA)
	empty := labelled(warm("team-a", "empty", nil))
	gate := holding(warm("ops", "gate", nil, imgA, imgB))
	elsewhere := labelled(warm("team-a", "elsewhere", map[string]warmv1.LabelValue{"pool": "gpu"}, imgA))
	paused := labelled(warm("team-a", "paused", nil, imgA))
	paused.Spec.Suspend = true
	for _, tc := range []struct {
		name    string
		in      func() Input
		labels  []string
		status  corev1.ConditionStatus
		reason  string
		message string
	}{{
		name:   "nothing present: no label; no startup taint asked: True",
		in:     func() Input { return input(web, plain) },
		status: corev1.ConditionTrue, reason: warmv1.ReasonNothingToWarm,
	}, {
		name: "present: the label of the ImageWarm that asks, only",
		in: func() Input {
			in := input(web, plain, elsewhere, paused)
			in.Runtime = listed(imgA)
			return in
		},
		labels: []string{"team-a.warm.warmer.dev/paused", "team-a.warm.warmer.dev/web"},
		status: corev1.ConditionTrue, reason: warmv1.ReasonNothingToWarm,
	}, {
		name: "one of two present: no label for the pair",
		in: func() Input {
			in := input(web, both)
			in.Runtime = listed(imgA)
			return in
		},
		labels: []string{"team-a.warm.warmer.dev/web"},
		status: corev1.ConditionTrue, reason: warmv1.ReasonNothingToWarm,
	}, {
		name: "listed but its pull still under way: no label",
		in: func() Input {
			in := input(web)
			in.Runtime = listed(imgA)
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling}
			return in
		},
		status: corev1.ConditionTrue, reason: warmv1.ReasonNothingToWarm,
	}, {
		name:   "no image yet (imagesFrom unresolved): no label",
		in:     func() Input { return input(empty) },
		status: corev1.ConditionTrue, reason: warmv1.ReasonNothingToWarm,
	}, {
		name: "startup taint ImageWarm missing an image: False, a message that does not move with each image",
		in: func() Input {
			in := input(gate)
			in.Runtime = listed(imgA)
			return in
		},
		status: corev1.ConditionFalse, reason: warmv1.ReasonImagesMissing,
		message: "Images of the 1 ImageWarms with startupTaint are missing; the node's NodeWarm lists each",
	}, {
		name: "startup taint ImageWarm warm: True",
		in: func() Input {
			in := input(gate, both)
			in.Runtime = listed(imgA, imgB)
			return in
		},
		labels: []string{"team-b.warm.warmer.dev/both"},
		status: corev1.ConditionTrue, reason: warmv1.ReasonImagesPresent,
		message: "Every image of the 1 ImageWarms with startupTaint is present",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out := decide(tc.in())
			if !slices.Equal(out.NodeLabels, tc.labels) {
				t.Errorf("labels %q, want %q", out.NodeLabels, tc.labels)
			}
			s := out.ImagesWarm
			if s.Status != tc.status || s.Reason != tc.reason || (tc.message != "" && s.Message != tc.message) {
				t.Errorf("ImagesWarm %s %s %q, want %s %s %q", s.Status, s.Reason, s.Message, tc.status, tc.reason, tc.message)
			}
		})
	}
}
