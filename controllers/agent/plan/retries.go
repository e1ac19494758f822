package plan

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// retriesAsWritten is st with each image whose only news since written is
// a retry of its failing pull (see retryOnly) shown as written shows it,
// and the counts recomputed; ok is false when no image is such. What it
// leaves different from written is what st says beyond retries: a node
// whose images keep failing alike would otherwise write its NodeWarm at
// each retry's start and end (a thousand such nodes overwhelmed the
// fleet benchmark's API server), while what it reports, that those images
// fail and why, has not changed.
func retriesAsWritten(written, st warmv1.NodeWarmStatus) (folded warmv1.NodeWarmStatus, ok bool) {
	if len(written.Images) != len(st.Images) {
		return st, false
	}
	var imgs []warmv1.NodeImage
	for i := range st.Images {
		if !retryOnly(written.Images[i], st.Images[i]) {
			continue
		}
		if imgs == nil {
			imgs = slices.Clone(st.Images)
		}
		imgs[i] = written.Images[i]
	}
	if imgs == nil {
		return st, false
	}
	st.Images = imgs
	count(&st)
	return st, true
}

// retryOnly says whether s, an image's entry now, differs from w, its
// entry as written while its pull was failing (BackOff), by a retry
// alone: the retry waiting or under way (Queued with no reason or the
// failure's, or Pulling), or failed again for the same reason, with more
// attempts, a newer transition time and a later next try, its other
// fields as written. A retry that
// succeeds, or fails another way, is news.
func retryOnly(w, s warmv1.NodeImage) bool {
	if w.State != warmv1.ImageBackOff || s.Attempts < w.Attempts || equality.Semantic.DeepEqual(w, s) {
		return false
	}
	switch {
	case s.State == warmv1.ImagePulling, s.State == warmv1.ImageQueued && (s.Reason == "" || s.Reason == w.Reason):
	case s.State == warmv1.ImageBackOff && s.Reason == w.Reason:
	default:
		return false
	}
	s.State, s.Reason, s.Message, s.Attempts, s.LastTransitionTime, s.Progress, s.RetryAt = w.State, w.Reason, w.Message, w.Attempts, w.LastTransitionTime, w.Progress, w.RetryAt
	return equality.Semantic.DeepEqual(w, s)
}
