package pullsecrets

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
)

// DefaultResync is how often each source is read again when
// Bundler.Resync is zero.
const DefaultResync = time.Minute

// DefaultWorkers is how many nodes are worked on at once when
// Bundler.Workers is zero.
const DefaultWorkers = 4

// ReaderRole is the ClusterRole (config/rbac) that lets the controller
// GET Secrets; bound per namespace, it opts that namespace in.
const ReaderRole = "warmer-controller-pull-secrets"

// Bundler keeps one sealed credential bundle per node in Namespace. Its
// reconcile key is the node's name.
type Bundler struct {
	// Client reads ImageWarms, NodeWarms, Nodes (metadata) and the
	// bundles from the manager's cache (CacheOptions), and writes
	// bundles.
	Client client.Client
	// Reader GETs source Secrets, and lists the copies earlier releases
	// left, without a cache.
	Reader client.Reader
	// Namespace is warmer's namespace, where bundles live.
	Namespace string
	// Resync is how often a source is read again; DefaultResync when zero.
	Resync time.Duration
	// Workers is how many nodes are worked on at once; DefaultWorkers
	// when zero.
	Workers int
	// Clock is the binary's clock; nil means the real one.
	Clock clock.PassiveClock

	sources *sources
}

// CacheOptions restricts the manager's Secret cache to the bundles: the
// controller watches no other Secret.
func CacheOptions(namespace string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{credbundle.Label: "true"}),
	}
}

// SetupWithManager registers the bundler and the removal of the copies
// earlier releases kept.
func (b *Bundler) SetupWithManager(mgr ctrl.Manager) error {
	if b.Client == nil {
		b.Client = mgr.GetClient()
	}
	if b.Reader == nil {
		b.Reader = mgr.GetAPIReader()
	}
	if b.Clock == nil {
		b.Clock = clock.RealClock{}
	}
	b.sources = &sources{reader: b.Reader, ns: b.Namespace, resync: b.resync(), clock: b.Clock}
	if err := mgr.Add(&legacyCopies{client: b.Client, reader: b.Reader, ns: b.Namespace}); err != nil {
		return err
	}
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	byBundle := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		node := o.GetAnnotations()[credbundle.NodeAnnotation]
		if node == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: node}}}
	})
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return ctrl.NewControllerManagedBy(mgr).Named("credentialbundles").
		WithOptions(controller.Options{MaxConcurrentReconciles: b.workers()}).
		Watches(&warmv1.NodeWarm{}, byName, builder.WithPredicates(keyChanged())).
		WatchesMetadata(node, byName, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&warmv1.ImageWarm{}, handler.EnqueueRequestsFromMapFunc(b.keyedNodes),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, byBundle).
		Complete(b)
}

// keyChanged passes NodeWarm creations, deletions and changes of the
// credential key, not the agents' frequent progress reports.
func keyChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*warmv1.NodeWarm)
		n, ok2 := e.ObjectNew.(*warmv1.NodeWarm)
		return !ok1 || !ok2 || !sameKey(o.Status.CredentialKey, n.Status.CredentialKey) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}

func sameKey(a, b *warmv1.CredentialKey) bool {
	if a == nil || b == nil {
		return a == b
	}
	return credbundle.Fingerprint(*a) == credbundle.Fingerprint(*b)
}

// keyedNodes is every node with a published key: an ImageWarm's change
// may add or take away any node's secrets. A bundle whose inputs did not
// change is not written.
func (b *Bundler) keyedNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	var list warmv1.NodeWarmList
	if err := b.Client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Status.CredentialKey != nil {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return out
}

// Reconcile brings one node's bundle in line with its key and the
// ImageWarms that select it.
func (b *Bundler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := req.Name
	in, err := b.gather(ctx, node)
	if err != nil || in == nil {
		return reconcile.Result{}, err
	}
	if len(in.sources) == 0 {
		return reconcile.Result{}, b.drop(ctx, node)
	}
	read, readErr := b.sources.readAll(ctx, in.sources)
	if err := b.write(ctx, node, *in.key, read); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: b.resync()}, readErr
}

func (b *Bundler) resync() time.Duration {
	if b.Resync > 0 {
		return b.Resync
	}
	return DefaultResync
}

func (b *Bundler) workers() int {
	if b.Workers > 0 {
		return b.Workers
	}
	return DefaultWorkers
}
