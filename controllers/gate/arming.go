package gate

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// armer keeps the arming Lease while the leader runs. The admission
// policy adds the gate only while the Lease exists, so gates are added
// only while a controller is there to remove them: the Lease is deleted
// at a clean stop, and, owned by the controller's Pod, goes with the Pod
// when it is deleted. A controller killed in place leaves it; the next
// one releases the overdue gates when it starts.
type armer struct{ r *Reconciler }

var _ manager.LeaderElectionRunnable = &armer{}

// NeedLeaderElection: the leader alone removes gates, so it alone arms.
func (a *armer) NeedLeaderElection() bool { return true }

// Start creates the Lease and deletes it when ctx ends.
func (a *armer) Start(ctx context.Context) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ArmingLease, Namespace: a.r.Namespace,
		Labels: map[string]string{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": "controller"}}}
	if a.r.PodName != "" && a.r.PodUID != "" {
		lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.r.PodName, UID: types.UID(a.r.PodUID)}}
	}
	if err := a.r.Client.Create(ctx, lease); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Armed the warm gate", "lease", ArmingLease, "namespace", a.r.Namespace)
	<-ctx.Done()
	// The manager's context is over; the deletion gets a short one of its
	// own.
	del, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.r.Client.Delete(del, lease); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
