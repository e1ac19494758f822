package imagewarm

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// BoundInterval is the least time between two writes of one ImageWarm's
// RolloutBound: a freed rollout slot reaches the next node within about
// this, the aggregation's pacing and the watch's latency, at any fleet
// size. Each write sends a few hundred bytes to every agent.
const BoundInterval = 500 * time.Millisecond

// rolloutBound reads iw's RolloutBound from the cache: nil when iw has no
// spec.rollout or the bound was never written.
func (r *Reconciler) rolloutBound(ctx context.Context, iw *warmv1.ImageWarm) (*warmv1.RolloutBound, error) {
	if iw.Spec.Rollout == nil {
		return nil, nil
	}
	b := &warmv1.RolloutBound{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(iw), b)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting the RolloutBound of ImageWarm %s: %w", client.ObjectKeyFromObject(iw), err)
	}
	return b, nil
}

// publishBound writes want's bound into iw's RolloutBound when it admits
// more than the agents can see now: b, and onServer, iw's status as it
// stands on the server after this reconcile's write (or its absence). It
// returns how soon to try again when the pacer holds the write back. The
// ImageWarm's status carries the bound too, with its progress, at the
// status pacing: this write is what lets a wave follow the last without
// waiting for it.
func (r *Reconciler) publishBound(ctx context.Context, iw *warmv1.ImageWarm, b *warmv1.RolloutBound,
	onServer *warmv1.ImageWarmStatus, want *warmv1.RolloutStatus) (time.Duration, error) {
	if iw.Spec.Rollout == nil || want == nil || want.AdmittedBelow <= seenBound(iw, b, onServer, want) {
		return 0, nil
	}
	key := client.ObjectKeyFromObject(iw)
	if wait := r.pacer.boundWait(key); wait > 0 {
		return wait, nil
	}
	spec := warmv1.RolloutBoundSpec{ImageWarmUID: string(iw.UID), Generation: want.Generation,
		Resolved: want.Resolved, AdmittedBelow: want.AdmittedBelow}
	var err error
	if b == nil {
		err = r.Client.Create(ctx, newRolloutBound(iw, spec))
	} else {
		b = b.DeepCopy()
		b.Spec, b.OwnerReferences = spec, []metav1.OwnerReference{ownedBy(iw)}
		err = r.Client.Update(ctx, b)
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		// The cache is about to show what was there.
		return conflictRetry, nil
	case err != nil:
		return 0, fmt.Errorf("writing the RolloutBound of ImageWarm %s: %w", key, err)
	}
	r.pacer.boundWrote(key)
	rolloutBoundWrites.Inc()
	log.FromContext(ctx).V(1).Info("Raised the rollout bound", "admittedBelow", spec.AdmittedBelow)
	return 0, nil
}

// seenBound is the bound the agents see for want's spec: the higher of
// b's, when written for iw and that spec, and onServer's.
func seenBound(iw *warmv1.ImageWarm, b *warmv1.RolloutBound, onServer *warmv1.ImageWarmStatus, want *warmv1.RolloutStatus) int64 {
	seen, _ := warmv1.BoundFor(iw.UID, want.Generation, want.Resolved, onServer.Rollout, b)
	return seen
}

// newRolloutBound is iw's RolloutBound holding spec: same namespace and
// name, owned by iw so that the garbage collector deletes it with iw.
func newRolloutBound(iw *warmv1.ImageWarm, spec warmv1.RolloutBoundSpec) *warmv1.RolloutBound {
	return &warmv1.RolloutBound{
		ObjectMeta: metav1.ObjectMeta{Namespace: iw.Namespace, Name: iw.Name,
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "warmer"},
			OwnerReferences: []metav1.OwnerReference{ownedBy(iw)}},
		Spec: spec,
	}
}

// ownedBy is an owner reference to iw. It does not block iw's deletion:
// setting that would need the finalizers subresource of every ImageWarm,
// and nothing is lost when the bound outlives its ImageWarm for a moment
// (agents match its UID).
func ownedBy(iw *warmv1.ImageWarm) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: warmv1.GroupVersion.String(), Kind: "ImageWarm",
		Name: iw.Name, UID: iw.UID, Controller: ptr.To(true)}
}
