package gate

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Reconciler removes the warmer.dev/warm scheduling gate from Pods once
// their images are warm, or their deadline passed.
type Reconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	Clock    clock.PassiveClock
	// Namespace holds the arming Lease; empty: the Lease is not managed
	// (the admission policy is then armed by hand, or not at all).
	Namespace string
	// PodName and PodUID are the controller's own Pod, which owns the
	// arming Lease so that the Lease goes with the Pod.
	PodName, PodUID string
}

// Reconcile decides one gated Pod.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !gated(&pod) || pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	in, err := r.gather(ctx, &pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(in)
	if !d.Release {
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if err := r.release(ctx, &pod, d); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches gated Pods, and wakes them on any change of the
// ImageWarms and NodeWarms that decide them. It also keeps the arming
// Lease while the manager runs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Namespace != "" {
		if err := mgr.Add(&armer{r: r}); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("warmgate").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			pod, ok := o.(*corev1.Pod)
			return ok && gated(pod)
		}))).
		Watches(&warmv1.ImageWarm{}, handler.EnqueueRequestsFromMapFunc(r.podsOf)).
		Watches(&warmv1.NodeWarm{}, handler.EnqueueRequestsFromMapFunc(r.allGated)).
		Complete(r)
}

// gated says the Pod carries warmer's gate.
func gated(pod *corev1.Pod) bool {
	return pod.Labels[LabelImageWarm] != "" && slices.ContainsFunc(pod.Spec.SchedulingGates,
		func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// podsOf are the gated Pods that name the ImageWarm.
func (r *Reconciler) podsOf(ctx context.Context, o client.Object) []reconcile.Request {
	return r.gatedPods(ctx, client.InNamespace(o.GetNamespace()), client.MatchingLabels{LabelImageWarm: o.GetName()})
}

// allGated are every gated Pod: a node's report may decide any of them.
func (r *Reconciler) allGated(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.gatedPods(ctx, client.HasLabels{LabelImageWarm})
}

func (r *Reconciler) gatedPods(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing gated Pods")
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		if gated(&pods.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return out
}
