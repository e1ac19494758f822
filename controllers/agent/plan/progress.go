package plan

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/bytesize"
	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// The bytes of pulls under way, as the engine reads them in the runtime's
// content store, go into the NodeWarm: per image, summed for the node,
// and once more in words for kubectl's Progress column.

// imageProgress is a pulling image's progress for its entry; nil when the
// engine has not found what the pull fetches.
func imageProgress(s pull.Status) *warmv1.PullProgress {
	p := s.Progress
	if s.State != pull.StatePulling || p == nil || !p.Known {
		return nil
	}
	out := &warmv1.PullProgress{BytesDone: min(p.Done, p.Total, maxProgressBytes), BytesTotal: min(p.Total, maxProgressBytes)}
	if left, ok := p.Left(); ok {
		out.SecondsLeft = ptr.To(min(int64(math.Ceil(left.Seconds())), maxSecondsLeft))
	}
	if p.UnpackSeen {
		out.BytesUnpacked = ptr.To(min(max(p.Unpacked, 0), maxProgressBytes))
	}
	return out
}

// The API's bounds of a progress (the largest NodeWarm's budget): a value
// beyond would have the whole report refused.
const (
	maxProgressBytes = 999_999_999_999_999
	maxSecondsLeft   = 9_999_999
)

// sumProgress adds up the images' progress: bytes summed, time left the
// longest of theirs (the pulls run side by side).
func sumProgress(st *warmv1.NodeWarmStatus) {
	st.PullProgress, st.Progress = nil, ""
	var sum warmv1.NodePullProgress
	n := 0
	for _, img := range st.Images {
		p := img.Progress
		if p == nil {
			continue
		}
		n++
		sum.BytesDone += p.BytesDone
		sum.BytesTotal += p.BytesTotal
		if p.SecondsLeft != nil && (sum.SecondsLeft == nil || *p.SecondsLeft > *sum.SecondsLeft) {
			sum.SecondsLeft = ptr.To(*p.SecondsLeft)
		}
		sumPhase(&sum, p)
	}
	if n == 0 {
		return
	}
	sum.BytesDone, sum.BytesTotal = min(sum.BytesDone, maxProgressBytes), min(sum.BytesTotal, maxProgressBytes)
	if sum.BytesUnpacked != nil {
		sum.BytesUnpacked = ptr.To(min(*sum.BytesUnpacked, maxProgressBytes))
	}
	st.PullProgress, st.Progress = &sum, progressText(sum)
}

// sumPhase adds an image's phase and unpacked bytes to the node's sum:
// Downloading while any pull downloads.
func sumPhase(sum *warmv1.NodePullProgress, p *warmv1.PullProgress) {
	if ph := warmv1.PhaseOf(p); ph == warmv1.PullPhaseDownloading || sum.Phase == "" {
		sum.Phase = ph
	}
	if p.BytesUnpacked != nil {
		sum.BytesUnpacked = ptr.To(ptr.Deref(sum.BytesUnpacked, 0) + *p.BytesUnpacked)
	}
}

// progressText says a progress in words: "412 MiB of 1.2 GiB (33%), 2m10s
// left".
func progressText(p warmv1.NodePullProgress) string {
	s := fmt.Sprintf("%s of %s", bytesize.IEC(p.BytesDone), bytesize.IEC(p.BytesTotal))
	if p.BytesTotal > 0 {
		s += fmt.Sprintf(" (%d%%)", p.BytesDone*100/p.BytesTotal)
	}
	if p.Phase == warmv1.PullPhaseUnpacking {
		s += ", unpacking"
	}
	if p.SecondsLeft != nil {
		s += fmt.Sprintf(", %v left", time.Duration(*p.SecondsLeft)*time.Second)
	}
	return truncate.String(s, maxProgressText)
}

// maxProgressText is the NodeWarm progress field's bound.
const maxProgressText = 64

// progressCondition returns conds with PullProgress False, saying why,
// when the engine cannot see the bytes of pulls (unable); else without it:
// a condition that only says all is well would cost every NodeWarm its
// bytes.
func progressCondition(conds []metav1.Condition, unable string, now metav1.Time) []metav1.Condition {
	if unable == "" {
		meta.RemoveStatusCondition(&conds, warmv1.ConditionPullProgress)
		return conds
	}
	return setCondition(conds, metav1.Condition{Type: warmv1.ConditionPullProgress, Status: metav1.ConditionFalse,
		Reason:  warmv1.ReasonNoContentView,
		Message: truncate.String(unable+"; pulls go on without progress or stall detection", warmv1.MaxNodeConditionMessageLength),
	}, now)
}

// yieldCondition returns conds with Yielding True while the engine yields
// to the runtime's pulls for others, else without it.
func yieldCondition(conds []metav1.Condition, y pull.Yield, now metav1.Time) []metav1.Condition {
	if !y.On {
		meta.RemoveStatusCondition(&conds, warmv1.ConditionYielding)
		return conds
	}
	return setCondition(conds, metav1.Condition{Type: warmv1.ConditionYielding, Status: metav1.ConditionTrue,
		Reason: warmv1.ReasonRuntimePulling,
		Message: fmt.Sprintf("The runtime is pulling %d blobs none of the agent's pulls fetch (a starting Pod, most likely): no warm pull starts until they are in",
			y.Blobs),
	}, now)
}
