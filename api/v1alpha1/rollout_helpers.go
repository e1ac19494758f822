package v1alpha1

import (
	"hash/fnv"

	"k8s.io/apimachinery/pkg/types"
)

// RolloutPlace is a node's place in an ImageWarm's rollout: the 32-bit
// FNV-1a hash of the ImageWarm's UID and the node's name. The controller
// admits nodes in this order and agents compare it with
// status.rollout.admittedBelow, so both must compute it alike: it may never
// change from one release to the next. The UID makes the order, and so the
// canary, differ from one ImageWarm to another; it stays the same across
// restarts.
func RolloutPlace(uid types.UID, node string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(node))
	return h.Sum32()
}

// RolloutAdmits says whether iw lets the named node pull: always without
// spec.rollout; with it, only when the node's place is below the current
// bound (see CurrentBound), given b, the RolloutBound of iw's name or nil.
// A node waits while the controller has not caught up with a new spec.
func RolloutAdmits(iw *ImageWarm, b *RolloutBound, node string) bool {
	if iw.Spec.Rollout == nil {
		return true
	}
	bound, ok := CurrentBound(iw, b)
	return ok && int64(RolloutPlace(iw.UID, node)) < bound
}

// CurrentBound is the bound of iw's rollout for its current spec (its
// generation and resolved images): the higher of status.rollout's and b's,
// each counted only when written for that spec, and b only when written
// for iw's UID. ok is false when neither is: the controller has not
// caught up with the spec, and no node is admitted. The bound of one spec
// only ever rises, so the higher of two is the newer.
func CurrentBound(iw *ImageWarm, b *RolloutBound) (bound int64, ok bool) {
	return BoundFor(iw.UID, iw.Generation, iw.ResolvedHash(), iw.Status.Rollout, b)
}

// BoundFor is the bound of the rollout of the ImageWarm with uid for the
// spec of generation and resolved hash: the higher of r's and b's, each
// counted only when written for that spec, and b only for uid; ok is false
// when neither is.
func BoundFor(uid types.UID, generation int64, resolved string, r *RolloutStatus, b *RolloutBound) (bound int64, ok bool) {
	if r != nil && r.Generation == generation && r.Resolved == resolved {
		bound, ok = r.AdmittedBelow, true
	}
	if b != nil && types.UID(b.Spec.ImageWarmUID) == uid && b.Spec.Generation == generation && b.Spec.Resolved == resolved {
		bound, ok = max(bound, b.Spec.AdmittedBelow), true
	}
	return bound, ok
}

// RaiseRollout sets iw's status.rollout to the current bound (see
// CurrentBound) when b raises it, so that whoever computes the next bound
// from iw's status starts where b left it. Other fields of status.rollout
// are kept when it was for the current spec.
func RaiseRollout(iw *ImageWarm, b *RolloutBound) {
	bound, ok := CurrentBound(iw, b)
	r := iw.Status.Rollout
	if !ok || (r != nil && r.Generation == iw.Generation && r.Resolved == iw.ResolvedHash() && r.AdmittedBelow == bound) {
		return
	}
	raised := RolloutStatus{Generation: iw.Generation, Resolved: iw.ResolvedHash()}
	if r != nil && r.Generation == raised.Generation && r.Resolved == raised.Resolved {
		raised = *r
	}
	raised.AdmittedBelow = bound
	iw.Status.Rollout = &raised
}
