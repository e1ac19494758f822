package warmerctl

import (
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Follower keeps one ImageWarm and every NodeWarm current by a watch of
// each (client-go's informers: one List, then changes).
type Follower struct {
	iws, nws cache.Store
	changed  chan struct{}
	synced   []cache.InformerSynced
}

// Follow starts watching ns/name and the NodeWarms until ctx ends.
// Changed is signalled (coalesced) on every change.
func (r *Reader) Follow(ctx context.Context, ns, name string) *Follower {
	f := &Follower{changed: make(chan struct{}, 1)}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.signal() },
		UpdateFunc: func(any, any) { f.signal() },
		DeleteFunc: func(any) { f.signal() },
	}
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	var ctrl cache.Controller
	f.iws, ctrl = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: r.listWatch(func() client.ObjectList { return &warmv1.ImageWarmList{} }, ns, byName),
		ObjectType:    &warmv1.ImageWarm{}, Handler: h,
	})
	go ctrl.RunWithContext(ctx)
	f.synced = append(f.synced, ctrl.HasSynced)
	f.nws, ctrl = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: r.listWatch(func() client.ObjectList { return &warmv1.NodeWarmList{} }, "", ""),
		ObjectType:    &warmv1.NodeWarm{}, Handler: h,
	})
	go ctrl.RunWithContext(ctx)
	f.synced = append(f.synced, ctrl.HasSynced)
	return f
}

// listWatch lists in pages and watches one kind through the client.
func (r *Reader) listWatch(newList func() client.ObjectList, ns, fieldSel string) *cache.ListWatch {
	opts := func(o metav1.ListOptions) []client.ListOption {
		o.FieldSelector = fieldSel
		if o.Limit == 0 && !o.Watch {
			o.Limit = listPage
		}
		return []client.ListOption{client.InNamespace(ns), &client.ListOptions{Raw: &o}}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := newList()
			return list, r.c.List(ctx, list, opts(o)...)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.c.Watch(ctx, newList(), opts(o)...)
		},
	}
}

func (f *Follower) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// Changed is signalled after each change, several folded into one.
func (f *Follower) Changed() <-chan struct{} { return f.changed }

// Synced reports whether both lists have arrived.
func (f *Follower) Synced() bool {
	return !slices.ContainsFunc(f.synced, func(s cache.InformerSynced) bool { return !s() })
}

// Snapshot is the ImageWarm (nil while it is not there) and the
// NodeWarms as last seen, sorted by name.
func (f *Follower) Snapshot() (*warmv1.ImageWarm, []warmv1.NodeWarm) {
	var iw *warmv1.ImageWarm
	if items := f.iws.List(); len(items) > 0 {
		iw = items[0].(*warmv1.ImageWarm)
	}
	items := f.nws.List()
	nws := make([]warmv1.NodeWarm, 0, len(items))
	for _, o := range items {
		nws = append(nws, *o.(*warmv1.NodeWarm))
	}
	slices.SortFunc(nws, func(a, b warmv1.NodeWarm) int { return strings.Compare(a.Name, b.Name) })
	return iw, nws
}
