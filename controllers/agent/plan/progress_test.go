package plan

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// TestYieldingAndNoViewConditions: Yielding is there only while the
// engine yields, PullProgress only while it cannot see pulls' bytes.
func TestYieldingAndNoViewConditions(t *testing.T) {
	in := input()
	in.Yield = pull.Yield{On: true, Since: in.Now, Blobs: 2}
	in.ContentUnable = "the container runtime offers no view of its pulls' bytes: runtime cri-o 1.34 is not containerd"
	st := decide(in).Status
	if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionYielding); c == nil || c.Status != metav1.ConditionTrue || c.Reason != warmv1.ReasonRuntimePulling {
		t.Errorf("Yielding = %+v while the engine yields", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionPullProgress); c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonNoContentView {
		t.Errorf("PullProgress = %+v without a content view", c)
	}
	in.Conditions, in.Yield, in.ContentUnable = st.Conditions, pull.Yield{}, ""
	in.Now = in.Now.Add(time.Second)
	st = decide(in).Status
	for _, typ := range []string{warmv1.ConditionYielding, warmv1.ConditionPullProgress} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
			t.Errorf("%s = %+v, want gone", typ, c)
		}
	}
}

// TestImageProgress: a pulling image shows the engine's bytes, clamped
// to its total, with the time left rounded up; the node sums them.
func TestImageProgress(t *testing.T) {
	s := pull.Status{State: pull.StatePulling, Progress: &pull.Progress{Known: true, Done: 300, Total: 1000, Rate: 200}}
	p := imageProgress(s)
	if p == nil || p.BytesDone != 300 || p.BytesTotal != 1000 || p.SecondsLeft == nil || *p.SecondsLeft != 4 {
		t.Fatalf("imageProgress = %+v", p)
	}
	if p := imageProgress(pull.Status{State: pull.StatePulling, Progress: &pull.Progress{}}); p != nil {
		t.Errorf("unknown progress shown: %+v", p)
	}
	st := warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{{Progress: p}, {Progress: &warmv1.PullProgress{BytesDone: 1 << 30, BytesTotal: 2 << 30}}, {}}}
	sumProgress(&st)
	if st.PullProgress == nil || st.PullProgress.BytesTotal != 1000+2<<30 || *st.PullProgress.SecondsLeft != 4 ||
		st.Progress != "1.0 GiB of 2.0 GiB (49%), 4s left" {
		t.Errorf("sum %+v, %q", st.PullProgress, st.Progress)
	}
}

// TestProgressBounded: values past the API's bounds are cut to them, or
// the API server would refuse the whole NodeWarm.
func TestProgressBounded(t *testing.T) {
	huge := pull.Status{State: pull.StatePulling, Progress: &pull.Progress{Known: true, Done: 1, Total: 1 << 62, Rate: 1e-3}}
	p := imageProgress(huge)
	if p.BytesTotal != maxProgressBytes || p.SecondsLeft == nil || *p.SecondsLeft != maxSecondsLeft {
		t.Errorf("imageProgress = %+v, %v; want the bounds", p, *p.SecondsLeft)
	}
}

// TestPhaseProgress: an unpacking image shows its unpacked bytes, its
// phase told by its bytes (the entry says none: the NodeWarm's budget);
// the node's sum says Downloading while any image downloads,
// Unpacking when all that say a phase unpack, and so does its text; a
// runtime that shows no unpacking gives no unpacked bytes.
func TestPhaseProgress(t *testing.T) {
	unpacking := imageProgress(pull.Status{State: pull.StatePulling, Progress: &pull.Progress{Known: true, Done: 1000, Total: 1000,
		Phase: pull.PhaseUnpacking, UnpackSeen: true, Layers: 2, LayersUnpacked: 1, Unpacked: 700, UnpackRate: 100}})
	if warmv1.PhaseOf(unpacking) != warmv1.PullPhaseUnpacking || unpacking.BytesUnpacked == nil || *unpacking.BytesUnpacked != 700 ||
		unpacking.SecondsLeft == nil || *unpacking.SecondsLeft != 3 {
		t.Fatalf("imageProgress = %+v", unpacking)
	}
	downloading := imageProgress(pull.Status{State: pull.StatePulling, Progress: &pull.Progress{Known: true, Done: 10, Total: 1000, Phase: pull.PhaseDownloading}})
	if warmv1.PhaseOf(downloading) != warmv1.PullPhaseDownloading || downloading.BytesUnpacked != nil {
		t.Fatalf("imageProgress = %+v, want Downloading with no unpacked bytes (none seen)", downloading)
	}
	st := warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{{Progress: unpacking}, {Progress: downloading}}}
	sumProgress(&st)
	if st.PullProgress.Phase != warmv1.PullPhaseDownloading || *st.PullProgress.BytesUnpacked != 700 {
		t.Errorf("sum %+v, want Downloading with 700 unpacked", st.PullProgress)
	}
	st = warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{{Progress: unpacking}}}
	sumProgress(&st)
	if st.PullProgress.Phase != warmv1.PullPhaseUnpacking || !strings.Contains(st.Progress, "unpacking") {
		t.Errorf("sum %+v %q, want Unpacking", st.PullProgress, st.Progress)
	}
}
