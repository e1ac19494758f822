package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// conflictRetry is how soon a status write that lost a conflict is retried:
// the cache is about to catch up with whatever won.
const conflictRetry = 200 * time.Millisecond

// writeStatus writes status unless it equals iw's. The update carries iw's
// resourceVersion, so a status computed from a stale ImageWarm is refused
// rather than written over a newer one. It is a whole update, not a merge
// patch: a patch computed from the cached copy leaves out zero counts the
// server never stored, and kubectl's columns then show them blank.
func (r *ImageWarmReconciler) writeStatus(ctx context.Context, iw *warmv1.ImageWarm, status warmv1.ImageWarmStatus) (ctrl.Result, error) {
	if equality.Semantic.DeepEqual(iw.Status, status) {
		imageWarmStatusWrites.WithLabelValues(statusUnchanged).Inc()
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(iw)
	iw = iw.DeepCopy()
	iw.Status = status
	err := r.Client.Status().Update(ctx, iw)
	switch {
	case apierrors.IsConflict(err):
		imageWarmStatusWrites.WithLabelValues(statusConflict).Inc()
		log.FromContext(ctx).V(1).Info("ImageWarm changed under the status write; retrying")
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		r.forget(key)
		return ctrl.Result{}, nil
	case err != nil:
		imageWarmStatusWrites.WithLabelValues(statusError).Inc()
		return ctrl.Result{}, fmt.Errorf("writing the status of ImageWarm %s: %w", key, err)
	}
	r.limiter.wrote(key)
	imageWarmStatusWrites.WithLabelValues(statusWritten).Inc()
	log.FromContext(ctx).V(1).Info("Wrote ImageWarm status", "matching", status.Nodes.Matching,
		"ready", status.Nodes.Ready, "pulling", status.Nodes.Pulling, "failed", status.Nodes.Failed,
		"notReporting", status.Nodes.NotReporting)
	return ctrl.Result{}, nil
}

// writeLimiter spaces the status writes of each ImageWarm at least interval
// apart. It remembers the last write of each for one interval; a nil writeLimiter never
// defers.
type writeLimiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func newWriteLimiter(interval time.Duration, now func() time.Time) *writeLimiter {
	return &writeLimiter{interval: interval, now: now, last: map[types.NamespacedName]time.Time{}}
}

// wait is how long key's next write must wait; zero when it may go now.
func (l *writeLimiter) wait(key types.NamespacedName) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.last[key]
	if !ok {
		return 0
	}
	wait := last.Add(l.interval).Sub(l.now())
	if wait <= 0 {
		// Past the interval the entry says nothing; dropping it keeps the
		// map as small as the set of recently written ImageWarms.
		delete(l.last, key)
		return 0
	}
	return wait
}

// wrote records a write of key, now.
func (l *writeLimiter) wrote(key types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[key] = l.now()
}

// forget drops key, whose ImageWarm is gone.
func (l *writeLimiter) forget(key types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, key)
}
