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
// spec.rollout; with it, only when status.rollout is for the current
// generation and resolved images (ResolvedHash) and the node's place is
// below its bound. A node waits while the controller has not caught up
// with a new spec.
func RolloutAdmits(iw *ImageWarm, node string) bool {
	if iw.Spec.Rollout == nil {
		return true
	}
	r := iw.Status.Rollout
	if r == nil || r.Generation != iw.Generation || r.Resolved != iw.ResolvedHash() {
		return false
	}
	return int64(RolloutPlace(iw.UID, node)) < r.AdmittedBelow
}
