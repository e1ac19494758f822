// Package pullsecrets holds the controller that copies the pull secrets
// ImageWarms name into warmer's namespace, where the agents read them
// (see internal/secretcopy for why).
//
// The copier reads a source Secret only because an ImageWarm names it,
// and by GET: it never lists or watches Secrets outside its namespace.
// Where it may read is the operator's choice, a RoleBinding per namespace
// or one ClusterRoleBinding (docs/operations.md). Copies follow their
// sources every Resync, and go when no ImageWarm names their source or the
// source cannot be read any more (a RoleBinding revoked stops the copy).
package pullsecrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/secretcopy"
)

// DefaultResync is how often a copy is compared with its source when
// Copier.Resync is zero.
const DefaultResync = time.Minute

// ReaderRole is the ClusterRole (config/rbac) that lets the controller
// GET Secrets; bound per namespace, it opts that namespace in.
const ReaderRole = "warmer-controller-pull-secrets"

// Copier keeps one copy per named pull secret in Namespace. It has one
// reconcile key: every pass looks at all ImageWarms, so a secret named by
// many is read once.
type Copier struct {
	// Client reads ImageWarms and the copies from the manager's cache
	// (CacheOptions) and writes copies.
	Client client.Client
	// Reader GETs source Secrets without a cache.
	Reader client.Reader
	// Namespace is warmer's namespace, where copies live.
	Namespace string
	// Resync is how often a source is read again; DefaultResync when zero.
	Resync time.Duration
	// Clock is the binary's clock; nil means the real one.
	Clock clock.PassiveClock

	// read is when each source was last read; passes run one at a time.
	read map[types.NamespacedName]time.Time
}

// key is the copier's one reconcile key.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "pull-secrets"}}

// CacheOptions restricts the manager's Secret cache to the copies: the
// controller watches no other Secret.
func CacheOptions(namespace string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      labelSelector(),
	}
}

// SetupWithManager registers the copier. ImageWarm changes of spec, and
// changes to copies (one deleted by hand is written again), start a pass.
func (c *Copier) SetupWithManager(mgr ctrl.Manager) error {
	if c.Client == nil {
		c.Client = mgr.GetClient()
	}
	if c.Reader == nil {
		c.Reader = mgr.GetAPIReader()
	}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("pullsecrets").
		Watches(&warmv1.ImageWarm{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, one).
		Complete(c)
}

// Reconcile brings the copies in line with what ImageWarms name.
func (c *Copier) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	named, err := c.named(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	copies, err := c.copies(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := c.now()
	if c.read == nil {
		c.read = map[types.NamespacedName]time.Time{}
	}
	var errs []error
	for src := range named {
		have := copies[src]
		if have != nil && now.Sub(c.read[src]) < c.resync() {
			continue
		}
		if err := c.sync(ctx, src, have); err != nil {
			errs = append(errs, err)
			continue
		}
		c.read[src] = now
	}
	for src, have := range copies {
		if !named[src] {
			errs = append(errs, c.remove(ctx, have))
			delete(c.read, src)
		}
	}
	return reconcile.Result{RequeueAfter: c.resync()}, errors.Join(errs...)
}

// named is every source some ImageWarm not being deleted names.
func (c *Copier) named(ctx context.Context) (map[types.NamespacedName]bool, error) {
	var list warmv1.ImageWarmList
	if err := c.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[types.NamespacedName]bool{}
	for i := range list.Items {
		iw := &list.Items[i]
		if iw.DeletionTimestamp != nil {
			continue
		}
		for _, s := range iw.Spec.ImagePullSecrets {
			out[types.NamespacedName{Namespace: iw.Namespace, Name: s.Name}] = true
		}
	}
	return out, nil
}

// copies are the copies in the namespace by source; a Secret with the
// label that is not a well-formed copy is deleted.
func (c *Copier) copies(ctx context.Context) (map[types.NamespacedName]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabelsSelector{Selector: labelSelector()}); err != nil {
		return nil, err
	}
	out := map[types.NamespacedName]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		src, ok := secretcopy.Source(s)
		if !ok {
			if err := c.remove(ctx, s); err != nil {
				return nil, err
			}
			continue
		}
		out[src] = s
	}
	return out, nil
}

// sync reads src and writes its copy, or a placeholder saying why there
// is none.
func (c *Copier) sync(ctx context.Context, src types.NamespacedName, have *corev1.Secret) error {
	want, err := c.build(ctx, src)
	if err != nil {
		return err
	}
	switch {
	case have == nil:
		err = c.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache lagged; the watch brings it
		}
	case secretcopy.Same(have, want):
		return nil
	default:
		// Replace type and data: a Secret's type cannot change, so a
		// placeholder turning into a copy is deleted and created.
		if have.Type != want.Type {
			if err := c.remove(ctx, have); err != nil {
				return err
			}
			return client.IgnoreAlreadyExists(c.Client.Create(ctx, want))
		}
		want.ResourceVersion = have.ResourceVersion
		err = c.Client.Update(ctx, want)
	}
	if err == nil {
		log.FromContext(ctx).V(1).Info("Pull secret copied", "source", src.String(), "copy", want.Name,
			"problem", want.Annotations[secretcopy.Problem])
	}
	return err
}

// build reads src and returns its copy, or the placeholder that says why
// src cannot be used. Only errors that a retry may cure are returned.
func (c *Copier) build(ctx context.Context, src types.NamespacedName) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := c.Reader.Get(ctx, src, &sec)
	switch {
	case err == nil:
		return secretcopy.Copy(&sec, c.Namespace), nil
	case apierrors.IsNotFound(err):
		return secretcopy.Placeholder(src, c.Namespace,
			fmt.Sprintf("pull secret %q not found in namespace %q", src.Name, src.Namespace)), nil
	case apierrors.IsForbidden(err):
		return secretcopy.Placeholder(src, c.Namespace,
			fmt.Sprintf("warmer may not read pull secret %q of namespace %q: bind ClusterRole %s to ServiceAccount %s/warmer-controller in that namespace (a RoleBinding)",
				src.Name, src.Namespace, ReaderRole, c.Namespace)), nil
	}
	return nil, fmt.Errorf("reading pull secret %q of namespace %q: %w", src.Name, src.Namespace, err)
}

func (c *Copier) remove(ctx context.Context, s *corev1.Secret) error {
	return client.IgnoreNotFound(c.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}))
}

func (c *Copier) resync() time.Duration {
	if c.Resync > 0 {
		return c.Resync
	}
	return DefaultResync
}

func (c *Copier) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

func labelSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{secretcopy.Label: "true"})
}
