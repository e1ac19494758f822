package imagewarm

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// conflictRetry is how soon a status write that lost a conflict is retried:
// the cache is about to catch up with whatever won.
const conflictRetry = 200 * time.Millisecond

// writeStatus writes status unless it equals iw's, when the pacer lets it
// (a settled result at once, progress once per MinWriteInterval), else
// requeues for that time. The update carries iw's
// resourceVersion, so a status computed from a stale ImageWarm is refused
// rather than written over a newer one. It is a whole update, not a merge
// patch: a patch computed from the cached copy leaves out zero counts the
// server never stored, and kubectl's columns then show them blank. wrote
// says whether status is now on the server.
func (r *Reconciler) writeStatus(ctx context.Context, iw *warmv1.ImageWarm, status warmv1.ImageWarmStatus) (res ctrl.Result, wrote bool, err error) {
	if equality.Semantic.DeepEqual(iw.Status, status) {
		imageWarmStatusWrites.WithLabelValues(statusUnchanged).Inc()
		return ctrl.Result{}, true, nil
	}
	key := client.ObjectKeyFromObject(iw)
	if wait := r.pacer.writeWait(key, &iw.Status, &status); wait > 0 {
		imageWarmStatusWrites.WithLabelValues(statusDeferred).Inc()
		log.FromContext(ctx).V(2).Info("ImageWarm status write waits its turn", "wait", wait,
			"matching", status.Nodes.Matching, "notReporting", status.Nodes.NotReporting)
		return ctrl.Result{RequeueAfter: wait}, false, nil
	}
	iw = iw.DeepCopy()
	iw.Status = status
	before := iw.ResourceVersion
	err = r.Client.Status().Update(ctx, iw)
	switch {
	case apierrors.IsConflict(err):
		imageWarmStatusWrites.WithLabelValues(statusConflict).Inc()
		log.FromContext(ctx).V(1).Info("ImageWarm changed under the status write; retrying")
		return ctrl.Result{RequeueAfter: conflictRetry}, false, nil
	case apierrors.IsNotFound(err):
		r.forget(key)
		return ctrl.Result{}, false, nil
	case err != nil:
		imageWarmStatusWrites.WithLabelValues(statusError).Inc()
		return ctrl.Result{}, false, fmt.Errorf("writing the status of ImageWarm %s: %w", key, err)
	}
	r.pacer.wrote(key)
	r.own.record(key, before, iw.ResourceVersion, &status)
	imageWarmStatusWrites.WithLabelValues(statusWritten).Inc()
	log.FromContext(ctx).V(1).Info("Wrote ImageWarm status", "matching", status.Nodes.Matching,
		"ready", status.Nodes.Ready, "pulling", status.Nodes.Pulling, "failed", status.Nodes.Failed,
		"notReporting", status.Nodes.NotReporting)
	return ctrl.Result{}, true, nil
}
