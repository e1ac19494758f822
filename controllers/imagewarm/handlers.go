package imagewarm

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// nodeWarmHandler enqueues the ImageWarms a NodeWarm reports on, before and
// after the change: an ImageWarm the node dropped must be recounted too.
// Changes that leave the report as it was (a resync, metadata) enqueue none.
func nodeWarmHandler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) {
			enqueueReportedWarms(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) {
			if reportUnchanged(e.ObjectOld, e.ObjectNew) {
				return
			}
			enqueueReportedWarms(q, e.ObjectOld)
			enqueueReportedWarms(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q requestQueue) {
			enqueueReportedWarms(q, e.Object)
		},
	}
}

func enqueueReportedWarms(q requestQueue, o client.Object) {
	nw, ok := o.(*warmv1.NodeWarm)
	if !ok {
		return
	}
	for _, w := range nw.Status.Warms {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Name}})
	}
}

func reportUnchanged(oldObj, newObj client.Object) bool {
	o, ok1 := oldObj.(*warmv1.NodeWarm)
	n, ok2 := newObj.(*warmv1.NodeWarm)
	return ok1 && ok2 &&
		equality.Semantic.DeepEqual(o.Status.Warms, n.Status.Warms) &&
		equality.Semantic.DeepEqual(o.Status.Images, n.Status.Images)
}

// nodeHandler enqueues the ImageWarms whose selector matches a Node that
// came, went or changed labels, by its labels before and after. Other Node
// changes (status, heartbeats) enqueue nothing.
func (r *Reconciler) nodeHandler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q requestQueue) {
			r.enqueueSelecting(ctx, q, e.Object.GetLabels())
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q requestQueue) {
			if maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
				return
			}
			r.enqueueSelecting(ctx, q, e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q requestQueue) {
			r.enqueueSelecting(ctx, q, e.Object.GetLabels())
		},
	}
}

// enqueueSelecting enqueues every ImageWarm whose selector matches any of the
// label sets. One whose selector does not parse is enqueued anyway, so that
// its reconcile reports the problem.
func (r *Reconciler) enqueueSelecting(ctx context.Context, q requestQueue, sets ...map[string]string) {
	warms := &warmv1.ImageWarmList{}
	if err := r.Client.List(ctx, warms, client.UnsafeDisableDeepCopy); err != nil {
		// Only a cache that is not started fails here; the ImageWarms'
		// own initial events then cover the change.
		log.FromContext(ctx).Error(err, "Listing ImageWarms for a Node change")
		return
	}
	for i := range warms.Items {
		iw := &warms.Items[i]
		sel, err := iw.Spec.NodeSelector.AsNodeSelector()
		if err == nil && !matchesAny(sel, sets) {
			continue
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}})
	}
}

func matchesAny(sel labels.Selector, sets []map[string]string) bool {
	for _, s := range sets {
		if sel.Matches(labels.Set(s)) {
			return true
		}
	}
	return false
}
