package imagewarm

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/imagewarm/workloads"
	"github.com/warmer-dev/warmer/internal/truncate"
)

// CacheOptions are the controller manager's cache settings: managed fields
// are dropped from everything, ImageWarms lose the metadata the
// controller never reads (stripImageWarm), and workloads of the watched
// kinds (nil: every kind) are kept as their names, labels and pod template
// images only (workloads.Transform), so that caching every workload of the
// cluster for imagesFrom costs little.
func CacheOptions(watched []warmv1.WorkloadKind) cache.Options {
	byObject := map[client.Object]cache.ByObject{&warmv1.ImageWarm{}: {Transform: stripImageWarm}}
	for _, kind := range watchedOrAll(watched) {
		byObject[workloads.NewObject(kind)] = cache.ByObject{Transform: workloads.Transform}
	}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject}
}

// stripImageWarm drops, before an ImageWarm enters the cache, the metadata
// a tenant may make large and the controller never reads: labels,
// annotations (kubectl apply's last-applied copy of the spec among them),
// owner references, finalizers and managed fields. A namespace's hundred
// ImageWarms of a megabyte each in labels and annotations cost the cache
// their specs and statuses instead (test/security TestMemoryBomb). Status
// writes go to the status subresource, which takes nothing but the status
// from the object sent, so nothing stripped is written back.
func stripImageWarm(in any) (any, error) {
	if iw, ok := in.(*warmv1.ImageWarm); ok {
		iw.ManagedFields, iw.Annotations, iw.Labels = nil, nil, nil
		iw.OwnerReferences, iw.Finalizers = nil, nil
	}
	return in, nil
}

// watchedOrAll is watched, or every kind when nil.
func watchedOrAll(watched []warmv1.WorkloadKind) []warmv1.WorkloadKind {
	if watched == nil {
		return warmv1.WorkloadKinds
	}
	return watched
}

// watches says whether the controller watches kind.
func (r *Reconciler) watches(kind warmv1.WorkloadKind) bool {
	return slices.Contains(watchedOrAll(r.WatchedKinds), kind)
}

// watchWorkloads adds a watch of each workload kind the controller
// watches.
func (r *Reconciler) watchWorkloads(b *builder.Builder) *builder.Builder {
	for _, kind := range watchedOrAll(r.WatchedKinds) {
		b = b.Watches(workloads.NewObject(kind), r.workloadHandler(kind))
	}
	return b
}

// workloadHandler enqueues the ImageWarms of a workload's namespace whose
// imagesFrom selects it, by its labels before and after the change. Only
// changes of labels or template images count: the cache keeps nothing
// else of a workload, so a status update compares equal.
func (r *Reconciler) workloadHandler(kind warmv1.WorkloadKind) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q requestQueue) {
			r.enqueueImagesFrom(ctx, q, kind, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q requestQueue) {
			if maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) &&
				slices.Equal(workloads.Images(e.ObjectOld), workloads.Images(e.ObjectNew)) {
				return
			}
			r.enqueueImagesFrom(ctx, q, kind, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q requestQueue) {
			r.enqueueImagesFrom(ctx, q, kind, e.Object)
		},
	}
}

// enqueueImagesFrom enqueues the ImageWarms of the objects' namespace whose
// imagesFrom reads kind and selects any of the objects.
func (r *Reconciler) enqueueImagesFrom(ctx context.Context, q requestQueue, kind warmv1.WorkloadKind, objs ...client.Object) {
	warms := &warmv1.ImageWarmList{}
	if err := r.Client.List(ctx, warms, client.InNamespace(objs[0].GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "Listing ImageWarms for a workload change")
		return
	}
	sets := make([]map[string]string, len(objs))
	for i, o := range objs {
		sets[i] = o.GetLabels()
	}
	for i := range warms.Items {
		iw := &warms.Items[i]
		from := iw.Spec.ImagesFrom
		if from == nil || !readsKind(from, kind) {
			continue
		}
		sel, err := from.WorkloadSelector.AsSelector()
		if err == nil && !matchesAny(sel, sets) {
			continue
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}})
	}
}

func readsKind(from *warmv1.ImagesFrom, kind warmv1.WorkloadKind) bool {
	return len(from.Kinds) == 0 || slices.Contains(from.Kinds, kind)
}

// withResolved returns iw as the fold sees it: with imagesFrom, a copy
// whose status.resolved and ImagesResolved condition say what the selected
// workloads name now; without, a copy with neither. iw itself is left as
// read, so the write can tell what changed.
func (r *Reconciler) withResolved(ctx context.Context, iw *warmv1.ImageWarm) (*warmv1.ImageWarm, error) {
	view := iw.DeepCopy()
	from := iw.Spec.ImagesFrom
	if from == nil {
		view.Status.Resolved = nil
		meta.RemoveStatusCondition(&view.Status.Conditions, warmv1.ConditionImagesResolved)
		return view, nil
	}
	objs, err := r.selectedWorkloads(ctx, iw.Namespace, from)
	if err != nil {
		return nil, err
	}
	res := workloads.Resolve(iw.Spec.Images, objs, workloads.Limit(slices.Concat(iw.Spec.Images, iw.Spec.Artifacts)))
	view.Status.Resolved = res.Status()
	c := imagesResolvedCondition(&res, iw.Generation)
	if unwatched := r.unwatchedKinds(from); len(unwatched) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, warmv1.ReasonKindsNotWatched
		c.Message = fmt.Sprintf("the controller does not watch %v (its --images-from-kinds): their workloads are not read; %s", unwatched, c.Message)
	}
	meta.SetStatusCondition(&view.Status.Conditions, c)
	return view, nil
}

// unwatchedKinds are the kinds imagesFrom reads that the controller does
// not watch.
func (r *Reconciler) unwatchedKinds(from *warmv1.ImagesFrom) []warmv1.WorkloadKind {
	var out []warmv1.WorkloadKind
	for _, kind := range warmv1.WorkloadKinds {
		if readsKind(from, kind) && !r.watches(kind) {
			out = append(out, kind)
		}
	}
	return out
}

// selectedWorkloads lists, from the cache, the workloads of the kinds
// imagesFrom reads that its selector picks in namespace.
func (r *Reconciler) selectedWorkloads(ctx context.Context, namespace string, from *warmv1.ImagesFrom) ([]client.Object, error) {
	sel, err := from.WorkloadSelector.AsSelector()
	if err != nil {
		return nil, reconcile.TerminalError(fmt.Errorf("parsing the workloadSelector: %w", err))
	}
	var objs []client.Object
	for _, kind := range warmv1.WorkloadKinds {
		if !readsKind(from, kind) || !r.watches(kind) {
			continue
		}
		list := workloads.NewList(kind)
		// Not deep-copied: the resolver only reads them.
		if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", kind, err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			if co, ok := o.(client.Object); ok && co.GetDeletionTimestamp() == nil {
				objs = append(objs, co)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// imagesResolvedCondition says whether every image the workloads name is
// warmed, naming the first problem when not.
func imagesResolvedCondition(res *workloads.Result, generation int64) metav1.Condition {
	c := metav1.Condition{Type: warmv1.ConditionImagesResolved, Status: metav1.ConditionTrue,
		Reason: warmv1.ReasonResolved, ObservedGeneration: generation}
	switch {
	case len(res.Invalid) > 0:
		first := res.Invalid[0]
		c.Status, c.Reason = metav1.ConditionFalse, warmv1.ReasonInvalidImages
		c.Message = truncate.String(fmt.Sprintf("%d template images are not valid references and are not warmed; first: %s %s: %v",
			len(res.Invalid), first.Workload, first.Where, first.Err), warmv1.MaxMessageLength)
	case res.Dropped > 0:
		c.Status, c.Reason = metav1.ConditionFalse, warmv1.ReasonTooManyImages
		c.Message = fmt.Sprintf("the workloads name %d more images than the %d one ImageWarm may warm; the first %d by name are warmed",
			res.Dropped, warmv1.MaxImagesPerWarm, len(res.Images))
	default:
		c.Message = fmt.Sprintf("%d images from %d workloads", len(res.Images), res.Workloads)
	}
	return c
}

// warmImages are the images an ImageWarm warms: spec.images as written,
// then the resolved ones, then spec.artifacts.
func warmImages(iw *warmv1.ImageWarm) []string {
	out := make([]string, 0, len(iw.Spec.Images)+len(iw.ResolvedImages())+len(iw.Spec.Artifacts))
	for _, img := range iw.Spec.Images {
		out = append(out, string(img))
	}
	out = append(out, iw.ResolvedImages()...)
	for _, img := range iw.Spec.Artifacts {
		out = append(out, string(img))
	}
	return out
}
