package imagewarm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// imageWarm gets the ImageWarm to reconcile, or nil when it is gone or going,
// in which case what the reconciler keeps about it is dropped. Its status
// is the controller's last write when the cache has not caught up with it
// (echo.go).
func (r *Reconciler) imageWarm(ctx context.Context, key types.NamespacedName) (*warmv1.ImageWarm, error) {
	iw := &warmv1.ImageWarm{}
	err := r.Client.Get(ctx, key, iw)
	switch {
	case apierrors.IsNotFound(err):
		r.forget(key)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting ImageWarm %s: %w", key, err)
	case iw.DeletionTimestamp != nil:
		return nil, nil
	}
	r.own.catchUp(iw)
	return iw, nil
}

// forget drops the write history and the metric series of a deleted
// ImageWarm.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.pacer.forget(key)
	r.own.forget(key)
	forgetImageWarmNodes(key.Namespace, key.Name)
}

// readFleet lists every Node's metadata and every NodeWarm from the cache.
// The lists are not deep-copied: with a thousand nodes, copying every report
// on every reconcile would dominate the cost. aggregateStatus only reads them.
func (r *Reconciler) readFleet(ctx context.Context) (*fleet, error) {
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	reports := &warmv1.NodeWarmList{}
	if err := r.Client.List(ctx, reports, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing NodeWarms: %w", err)
	}
	f := newFleet(nodes.Items, reports.Items)
	f.now = r.Clock.Now()
	var err error
	if f.agents, err = r.readAgents(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// aggregateTimed is aggregateStatus, measured, with the node counts
// published.
func aggregateTimed(iw *warmv1.ImageWarm, f *fleet) (warmv1.ImageWarmStatus, error) {
	// The fold's own cost, on the real clock: a metric of work done, not a
	// decision, so the controller's Clock does not apply.
	start := time.Now()
	status, err := aggregateStatus(iw, f)
	imageWarmAggregateSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		recordImageWarmNodes(iw.Namespace, iw.Name, status.Nodes)
	}
	return status, err
}
