package imagewarm

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// DefaultMinWriteInterval is the least time between two status writes of one
// ImageWarm when Reconciler.MinWriteInterval is zero.
const DefaultMinWriteInterval = time.Second

// Reconciler folds the agents' NodeWarm reports into each
// ImageWarm's status: node counts, per-image counts, the first few failures
// and the Ready, Progressing and Degraded conditions. It runs in the
// leader-elected controller, never in the agents. Its one reconcile key is
// the ImageWarm; Node and NodeWarm changes enqueue the ImageWarms they
// concern.
type Reconciler struct {
	// Client reads ImageWarms, NodeWarms, Nodes and workloads and writes
	// ImageWarm status. Its reads must come from the manager's cache (every reconcile
	// lists all Nodes and NodeWarms); SetupWithManager sets the manager's
	// client when it is nil.
	Client client.Client
	// MinWriteInterval is the least time between two progress writes of
	// one ImageWarm's status; DefaultMinWriteInterval when zero. A change
	// that comes sooner is written when the interval is over, never
	// dropped; a status that settles (no node pulling or yet to report) is
	// written at once.
	MinWriteInterval time.Duration
	// AggregateInterval is the least time between two aggregations of one
	// ImageWarm after a short burst; DefaultAggregateInterval when zero.
	// It bounds the work of a fleet reporting on one ImageWarm.
	AggregateInterval time.Duration
	// ServedInterval is the least time between two status writes of one
	// ImageWarm for which only servedStarts moved; DefaultServedInterval
	// when zero.
	ServedInterval time.Duration
	// AgentNamespace is where the agent Pods run, whose readiness says
	// which agents are alive (liveness.go); empty: agents are judged by
	// their reports alone. The manager's cache must hold those Pods
	// (AgentPodCache).
	AgentNamespace string
	// WatchedKinds are the workload kinds the controller watches for
	// spec.imagesFrom; nil watches every kind (warmv1.WorkloadKinds), an
	// empty list none. The manager's cache must have CacheOptions of the
	// same kinds.
	WatchedKinds []warmv1.WorkloadKind
	// Clock tells the time of reads and writes, the binary's one clock;
	// nil means the real one.
	Clock clock.PassiveClock

	pacer *statusPacer
	// own holds each ImageWarm's last status write until the cache does.
	own ownWrites
}

// The controller's RBAC is written by hand in
// config/rbac/controller_role.yaml and, for imagesFrom,
// controller_images_from_role.yaml (see config/rbac/kustomization.yaml).

// SetupWithManager registers the reconciler. Nodes are watched and cached as
// metadata only: their labels are all it reads, and full Nodes (status,
// images) would cost far more memory in a large cluster. Workloads are
// watched for imagesFrom, and cached stripped to their images when the
// manager's cache has CacheOptions.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	interval, aggregate := r.MinWriteInterval, r.AggregateInterval
	if interval <= 0 {
		interval = DefaultMinWriteInterval
	}
	if aggregate <= 0 {
		aggregate = DefaultAggregateInterval
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.pacer = newStatusPacer(interval, aggregate, r.Clock.Now)
	if r.ServedInterval > 0 {
		r.pacer.served = r.ServedInterval
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("imagewarm").
		// Our own status writes need no reconcile; spec changes,
		// creation and deletion do.
		For(&warmv1.ImageWarm{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&warmv1.NodeWarm{}, nodeWarmHandler()).
		WatchesMetadata(&corev1.Node{}, r.nodeHandler())
	if r.AgentNamespace != "" {
		b = b.Watches(&corev1.Pod{}, r.agentPodHandler())
	}
	return r.watchWorkloads(b).Complete(r)
}

// Reconcile recomputes one ImageWarm's status from every matching node's
// report, at most a few times a second, and writes it when it changed: at
// once when it settled, else at most once per MinWriteInterval.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	iw, err := r.imageWarm(ctx, req.NamespacedName)
	if err != nil || iw == nil {
		return ctrl.Result{}, err
	}
	// Pacing the aggregation bounds the work an ImageWarm costs while a
	// thousand agents report on it.
	if wait := r.pacer.aggregateWait(req.NamespacedName); wait > 0 {
		imageWarmStatusWrites.WithLabelValues(statusDeferred).Inc()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	view, err := r.withResolved(ctx, iw)
	if err != nil {
		return ctrl.Result{}, err
	}
	bound, err := r.rolloutBound(ctx, iw)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The next bound starts from the one the agents see, which the
	// RolloutBound may hold ahead of the status.
	warmv1.RaiseRollout(view, bound)
	f, err := r.readFleet(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.pacer.observeWatchers(len(f.reports))
	status, err := aggregateTimed(view, f)
	if err != nil {
		// The API server validates selectors; one that still does not
		// parse will not parse on a retry either.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	res, wrote, err := r.writeStatus(ctx, iw, status)
	if err != nil {
		return res, err
	}
	onServer := &iw.Status
	if wrote {
		onServer = &status
	}
	boundWait, err := r.publishBound(ctx, iw, bound, onServer, status.Rollout)
	res.RequeueAfter = sooner(res.RequeueAfter, boundWait)
	if err == nil && res.RequeueAfter == 0 && status.Rollout != nil && status.Rollout.Waiting > 0 {
		// Waiting nodes may owe their wait to a node whose agent's
		// grace runs out with no event to say so.
		res.RequeueAfter = rolloutRecheck
	}
	if err == nil {
		// An agent down now counts as dead then, with no event to say so.
		res.RequeueAfter = sooner(res.RequeueAfter, f.nextDeath())
	}
	return res, err
}

// sooner is the sooner of two requeue delays, where zero is none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case b <= 0:
		return a
	case a <= 0 || b < a:
		return b
	}
	return a
}
