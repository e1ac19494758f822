package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// The agent's RBAC is written by hand in config/rbac/agent_role.yaml: the
// agent and the status controller share this package, and controller-gen
// would merge their markers into one role.

// Engine is what the agent needs of the pull engine.
type Engine interface {
	// Presence lists the runtime's images once and indexes them.
	Presence(ctx context.Context) (*pullengine.Presence, error)
	// Sync makes reqs the set of pulls wanted now, cancelling the rest.
	Sync(ctx context.Context, reqs []pullengine.Request) []pullengine.Status
	// DiskUsage is the image filesystem's fill level.
	DiskUsage(ctx context.Context) pullengine.DiskUsage
	// Status is the engine's view of one image.
	Status(image string) (pullengine.Status, bool)
}

var _ Engine = &pullengine.Engine{}

// NodeAgent keeps the images that the ImageWarms matching one node ask
// for present on that node, and reports them in the node's NodeWarm. Its
// one reconcile key is the node; every pass lists the runtime's images once.
type NodeAgent struct {
	// Client reads ImageWarms and the Node from the cache and writes the
	// NodeWarm.
	Client client.Client
	// APIReader reads Secrets and the NodeWarm without a cache: the agent
	// may get, but never list or watch, Secrets.
	APIReader client.Reader
	// Engine pulls the images. The agent must also be its Listener.
	Engine Engine
	// Recorder records events on ImageWarms.
	Recorder recorder.EventRecorder
	// NodeName is the node this agent runs on.
	NodeName string
	// Runtime names the container runtime, for the NodeWarm.
	Runtime warmv1.RuntimeInfo
	// ResyncPeriod bounds the time between passes, so drift (an image the
	// kubelet's garbage collector removed) is caught.
	ResyncPeriod time.Duration
	// StatusLimiter is the token bucket NodeWarm writes go through.
	StatusLimiter flowcontrol.RateLimiter
	// ProgressInterval is the least time between two NodeWarm writes while
	// pulls are under way; a settled result is written at once.
	ProgressInterval time.Duration
	// PerImageEvents adds the kubelet's Pulling and Pulled events for every
	// image to the one Warmed event per ImageWarm (see agent_events.go).
	PerImageEvents bool

	trigger chan event.GenericEvent
	memo    parseMemo  // ImageWarm specs parsed by earlier passes; Reconcile's alone
	mu      sync.Mutex // guards st, which the engine's listener also reads
	st      agentState
}

// SetupWithManager registers the agent. It watches ImageWarms in every
// namespace and its own Node; the manager's cache must be limited to that
// Node (see cmd/warmer).
func (a *NodeAgent) SetupWithManager(mgr ctrl.Manager) error {
	a.trigger = make(chan event.GenericEvent, 1)
	a.st = newAgentState()
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: a.NodeName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent").
		For(&corev1.Node{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == a.NodeName }),
			predicate.LabelChangedPredicate{})).
		// Status writes by the controller do not change what the node
		// wants; only spec changes (and creation, deletion) do.
		Watches(&warmv1.ImageWarm{}, toNode, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(a.trigger, toNode)).
		Complete(a)
}

// Reconcile makes one pass: desired images, what the runtime holds, pulls
// for what is missing, and the NodeWarm report.
func (a *NodeAgent) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	node, err := a.node(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	nw, err := a.ensureNodeWarm(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired, err := a.desired(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	listedAt := time.Now()
	presence, err := a.Engine.Presence(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "Container runtime not answering")
		return ctrl.Result{RequeueAfter: runtimeRetry}, a.reportRuntimeDown(ctx, nw, err)
	}
	statuses := a.pull(ctx, node, desired, presence, listedAt)
	next, err := a.report(ctx, node, nw, desired, presence, statuses)
	return ctrl.Result{RequeueAfter: next}, err
}

// runtimeRetry is how soon a pass is retried when the runtime is down.
const runtimeRetry = 5 * time.Second

func (a *NodeAgent) node(ctx context.Context) (*corev1.Node, error) {
	var node corev1.Node
	if err := a.Client.Get(ctx, types.NamespacedName{Name: a.NodeName}, &node); err != nil {
		return nil, fmt.Errorf("getting node %q: %w", a.NodeName, err)
	}
	return &node, nil
}

func (a *NodeAgent) desired(ctx context.Context, node *corev1.Node) (desiredSet, error) {
	var list warmv1.ImageWarmList
	// The cache's own objects, not copies: every pass reads them all, and
	// nothing here writes to them.
	if err := a.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return desiredSet{}, fmt.Errorf("listing ImageWarms: %w", err)
	}
	set, bad := a.memo.desiredImages(node.Labels, list.Items)
	for _, nn := range bad {
		// The API server's validation should make this impossible.
		log.FromContext(ctx).Info("Skipping ImageWarm with an unusable selector", "imagewarm", nn)
	}
	return set, nil
}

// poke asks for a pass soon, without blocking: one pending poke is enough.
func (a *NodeAgent) poke() {
	select {
	case a.trigger <- event.GenericEvent{Object: &corev1.Node{}}:
	default:
	}
}
