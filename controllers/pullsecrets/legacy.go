package pullsecrets

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
)

// legacyInterval is how often the upgrade's clean-up looks again.
var legacyInterval = 15 * time.Second

// legacyCopies deletes the per-secret copies (label
// credbundle.LegacyCopyLabel) that releases before bundles kept in
// warmer's namespace, readable by every agent. Agents of those releases
// still read them during an upgrade, so they go once every NodeWarm
// publishes a credential key: every agent then reads its bundle. It runs
// on the leader only (a manager Runnable), and stops when none are left.
type legacyCopies struct {
	client client.Client
	reader client.Reader
	ns     string
}

// Start looks every legacyInterval until the copies are gone.
func (l *legacyCopies) Start(ctx context.Context) error {
	for {
		done, err := l.sweep(ctx)
		if err != nil {
			log.FromContext(ctx).Error(err, "Deleting the pull secret copies of an earlier release")
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(legacyInterval):
		}
	}
}

// sweep deletes the copies once every agent reads bundles; done is true
// when none are left.
func (l *legacyCopies) sweep(ctx context.Context) (done bool, err error) {
	var copies corev1.SecretList
	if err := l.reader.List(ctx, &copies, client.InNamespace(l.ns), client.HasLabels{credbundle.LegacyCopyLabel}); err != nil {
		return false, err
	}
	if len(copies.Items) == 0 {
		return true, nil
	}
	var nws warmv1.NodeWarmList
	if err := l.client.List(ctx, &nws); err != nil {
		return false, err
	}
	for i := range nws.Items {
		if nws.Items[i].Status.CredentialKey == nil {
			return false, nil // an agent of the earlier release still runs
		}
	}
	for i := range copies.Items {
		c := &copies.Items[i]
		if err := l.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
			return false, err
		}
	}
	log.FromContext(ctx).Info("Deleted the pull secret copies of an earlier release", "count", len(copies.Items))
	return true, nil
}
