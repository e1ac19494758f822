package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// The agent's RBAC is written by hand in config/rbac/agent_role.yaml, with
// the roles of the features that need more (agent_*_role.yaml).

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
	// Yielding says whether the engine yields to the runtime's pulls for
	// others.
	Yielding() pullengine.Yield
}

var _ Engine = &pullengine.Engine{}

// NodeAgent keeps the images that the ImageWarms matching one node ask
// for present on that node, and reports them in the node's NodeWarm. Its
// one reconcile key is the node. A pass gathers its inputs, lets the
// planner (package plan) decide, and applies the plan; what outlives a
// pass is in one place (carried), besides the inbox the engine reports to.
type NodeAgent struct {
	// Client reads ImageWarms, the Node and the NodeWarm from the cache
	// and writes the NodeWarm.
	Client client.Client
	// APIReader reads the node's credential bundle and the NodeWarm
	// without a cache: the agent may get, but never list or watch,
	// Secrets.
	APIReader client.Reader
	// SecretNamespace is warmer's namespace, where the controller keeps
	// each node's credential bundle; the agent reads no Secret elsewhere,
	// and there only its own node's. Empty means
	// credbundle.DefaultNamespace.
	SecretNamespace string
	// CredentialKey is the key pair the node's bundle is sealed to; its
	// public half goes in the NodeWarm. nil makes one when the agent
	// starts: it lives in memory only (internal/credbundle).
	CredentialKey *credbundle.KeyPair
	// Engine pulls the images; Listener must be given to it as its
	// listener.
	Engine Engine
	// Recorder records events on ImageWarms.
	Recorder recorder.EventRecorder
	// NodeName is the node this agent runs on.
	NodeName string
	// Runtime names the container runtime, for the NodeWarm.
	Runtime warmv1.RuntimeInfo
	// CredentialProviders names the credential-provider plugins the
	// engine runs, for the NodeWarm.
	CredentialProviders []string
	// ResyncPeriod bounds the time between passes, so drift (an image the
	// kubelet's garbage collector removed) is caught.
	ResyncPeriod time.Duration
	// StatusLimiter is the token bucket NodeWarm writes go through.
	StatusLimiter flowcontrol.RateLimiter
	// ProgressInterval is the least time between two NodeWarm writes while
	// pulls are under way; a settled result is written at once.
	ProgressInterval time.Duration
	// PullProgressInterval is the slowest pace of NodeWarm writes for
	// which only the bytes of pulls under way moved, taken when hundreds
	// of nodes pull (plan.BytesPace: every 2 s when a few do); 0: such a
	// change is not written alone.
	PullProgressInterval time.Duration
	// ServedInterval is the least time between two NodeWarm writes for
	// which only the counts of starts served warm moved; 0: such a change
	// is not written alone.
	ServedInterval time.Duration
	// RetryInterval is the least time between two NodeWarm writes for
	// which only retries of failing pulls moved (their attempts, the
	// retry under way); 0 writes each retry's start and end.
	RetryInterval time.Duration
	// ContentUnable says why the engine cannot see the bytes of pulls (no
	// content store); empty when it can.
	ContentUnable string
	// Containers lists the runtime's containers, to count the starts
	// warming served (served.go); nil counts none.
	Containers Containers
	// PerImageEvents adds the kubelet's Pulling and Pulled events for every
	// image to the one Warmed event per ImageWarm (see events.go).
	PerImageEvents bool
	// StartupTaintKey is the key of the taint the agent removes from its
	// node once the ImageWarms that ask for it are warm (startuptaint.go);
	// "" leaves the node's taints alone.
	StartupTaintKey string
	// StartupTaintDeadline is how long after the Node's creation the
	// startup taint goes, warm or not.
	StartupTaintDeadline time.Duration
	// NodeSignals has the agent keep the warm labels of ImageWarms with
	// spec.nodeLabel and the ImagesWarm condition on its Node
	// (nodesignal_patch.go).
	NodeSignals bool
	// signals are the node signals last written (nodesignal_patch.go).
	signals signalWrites
	// Clock is the agent's clock, which must be the engine's too (results
	// carry the engine's times, compared with the pass's); nil means the real
	// one.
	Clock clock.PassiveClock
	// Pinner pins the images of ImageWarms with retention Pinned; nil when
	// the runtime cannot, and PinUnable then says why.
	Pinner    Pinner
	PinUnable string
	// Marker marks the images pulled with pull secrets; nil when the
	// runtime cannot, and MarkUnable then says why.
	Marker     Marker
	MarkUnable string
	// EvictionBackOffInitial and EvictionBackOffMax space the pulls of an
	// image the node keeps removing (the kubelet's garbage collector on a
	// disk too small for what is asked): one per window, which starts at
	// the initial value and doubles with each eviction in a row.
	EvictionBackOffInitial, EvictionBackOffMax time.Duration
	// Verification is which images the runtime lists count as present
	// without a pull under an entry's own credentials; the zero value is
	// the kubelet's default, NeverVerifyPreloadedImages.
	Verification plan.Verification
	// AfterPass, when set, is called after every pass, outside it: the
	// binary's upkeep that follows the agent's work (returning memory to
	// the OS once the agent is quiet).
	AfterPass func()

	// trigger and inbox are the agent's plumbing: pokes for a pass, and
	// the engine's reports waiting for one.
	trigger chan event.GenericEvent
	inbox   inbox
	// passMu keeps the last pass (stop.go) from running beside a
	// controller's pass still under way as the manager stops.
	passMu sync.Mutex
	// carry is everything one pass leaves for the next.
	carry carried
}

// carried is all the agent keeps from one pass to the next; everything
// else a pass builds, it drops. Passes run one at a time: the controller
// has one worker (controller-runtime's default, which SetupWithManager
// keeps), and passMu holds the last one apart. Only the inbox, which the engine's
// goroutines write, has a lock of its own.
type carried struct {
	// plan is the planner's memory (images, secret problems, warm tallies).
	plan plan.State
	// memo keeps parsed ImageWarms for as long as they do not change.
	memo plan.Memo
	// report is the NodeWarm as last read or written, and the write
	// pacing's memory.
	report reportState
	// served counts the starts warming served (served.go).
	served served
	// fleetPulling is how many nodes pull fleet-wide, from the cached
	// ImageWarms' status (plan.FleetPulling): the pace of bytes.
	fleetPulling int64
	// creds is the node's bundle as last opened, and when each pull
	// secret was first found missing from it (secrets.go).
	creds heldCredentials
}

// Listener is what the engine reports pulls to. It only queues them for
// the next pass.
func (a *NodeAgent) Listener() pullengine.Listener {
	a.init()
	return &a.inbox
}

// init readies the agent's own parts; it is idempotent.
func (a *NodeAgent) init() {
	if a.trigger != nil {
		return
	}
	if a.Clock == nil {
		a.Clock = clock.RealClock{}
	}
	if a.CredentialKey == nil {
		k, err := credbundle.NewKeyPair()
		utilruntime.Must(err) // the system's random source failing
		a.CredentialKey = k
	}
	a.trigger = make(chan event.GenericEvent, 1)
	a.inbox.clock, a.inbox.poke, a.inbox.pokeOnStart = a.Clock, a.poke, a.PerImageEvents
}

// SetupWithManager registers the agent. It watches ImageWarms and
// RolloutBounds in every namespace, its own Node and its own NodeWarm; the manager's cache must
// be limited to those (AgentCacheOptions).
func (a *NodeAgent) SetupWithManager(mgr ctrl.Manager) error {
	a.init()
	if err := mgr.Add(lastReport{a: a}); err != nil {
		return err
	}
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: a.NodeName}}}
	})
	own := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == a.NodeName })
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent").
		WithOptions(controller.Options{NewQueue: quietQueue(mgr.GetLogger())}).
		// A new Node of the same name (created again) passes too: its
		// NodeWarm then needs the new owner.
		For(&corev1.Node{}, builder.WithPredicates(own, predicate.LabelChangedPredicate{})).
		// Status writes by the controller do not change what the node
		// wants, except a new set of images resolved from workloads
		// (imagesFrom) or a rollout's new bound; spec changes (and
		// creation, deletion) do. The status writes reach every agent's
		// watch anyway: this is a filter, not a new watch.
		Watches(&warmv1.ImageWarm{}, toNode, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, resolvedChanged, a.rolloutChanged()))).
		// A rollout's bound raised apart from the ImageWarm (see
		// RolloutBound): only the nodes it newly admits take a pass.
		Watches(&warmv1.RolloutBound{}, toNode, builder.WithPredicates(a.admittedNow())).
		// Its own NodeWarm deleted (by hand, or by the garbage collector
		// with a replaced Node) is written again at once.
		Watches(&warmv1.NodeWarm{}, toNode, builder.WithPredicates(own, deletedOnly)).
		WatchesRawSource(source.Channel(a.trigger, toNode)).
		Complete(a)
}

// rolloutBounds reads the RolloutBounds from the cache, by name.
func (a *NodeAgent) rolloutBounds(ctx context.Context) (plan.Bounds, error) {
	var list warmv1.RolloutBoundList
	if err := a.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing RolloutBounds: %w", err)
	}
	bounds := make(plan.Bounds, len(list.Items))
	for i := range list.Items {
		b := &list.Items[i]
		bounds[types.NamespacedName{Namespace: b.Namespace, Name: b.Name}] = b
	}
	return bounds, nil
}

// resolvedChanged passes updates of an ImageWarm whose resolved images
// (status.resolved, by hash) changed.
var resolvedChanged = warmUpdated(func(o, n *warmv1.ImageWarm) bool {
	return o.ResolvedHash() != n.ResolvedHash()
})

// rolloutChanged passes updates of an ImageWarm whose rollout status now
// admits the agent's node where it did not, or the reverse; its counts
// alone do not, nor a bound that moved past other nodes. Each status
// write reaches every agent, and a pass of every agent for the few a new
// bound admits cost a 1,000-node simulation more CPU than the rest of its
// work; the place is one hash of two short strings. A new spec passes by
// the other predicates.
func (a *NodeAgent) rolloutChanged() predicate.Funcs {
	return warmUpdated(func(o, n *warmv1.ImageWarm) bool {
		return !rolloutEqual(o.Status.Rollout, n.Status.Rollout) &&
			warmv1.RolloutAdmits(o, nil, a.NodeName) != warmv1.RolloutAdmits(n, nil, a.NodeName)
	})
}

// warmUpdated passes the updates of an ImageWarm for which changed, given
// the old and the new object, says true; nothing else.
func warmUpdated(changed func(o, n *warmv1.ImageWarm) bool) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*warmv1.ImageWarm)
			n, ok2 := e.ObjectNew.(*warmv1.ImageWarm)
			return ok1 && ok2 && changed(o, n)
		},
	}
}

// admittedNow passes a RolloutBound created or changed when it admits the
// agent's node and the one before did not (for the same ImageWarm and
// spec): each raise reaches every agent, and a pass of every node's agent
// for the few it admits cost the fleet simulation a core. The place is one
// hash of two short strings. A deletion waits for the next pass: the
// controller writes the bound again, and the ImageWarm's status carries it
// too once written.
func (a *NodeAgent) admittedNow() predicate.Funcs {
	admits := func(b *warmv1.RolloutBound) bool {
		return int64(warmv1.RolloutPlace(types.UID(b.Spec.ImageWarmUID), a.NodeName)) < b.Spec.AdmittedBelow
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			b, ok := e.Object.(*warmv1.RolloutBound)
			return ok && admits(b)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*warmv1.RolloutBound)
			n, ok2 := e.ObjectNew.(*warmv1.RolloutBound)
			if !ok1 || !ok2 || !admits(n) {
				return false
			}
			sameSpec := o.Spec.ImageWarmUID == n.Spec.ImageWarmUID && o.Spec.Generation == n.Spec.Generation && o.Spec.Resolved == n.Spec.Resolved
			return !sameSpec || !admits(o)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// rolloutEqual compares what of a rollout decides admission.
func rolloutEqual(a, b *warmv1.RolloutStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Generation == b.Generation && a.Resolved == b.Resolved && a.AdmittedBelow == b.AdmittedBelow
}

// deletedOnly passes deletions only.
var deletedOnly = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// Reconcile makes one pass: gather, plan, apply.
func (a *NodeAgent) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	a.init()
	if a.AfterPass != nil {
		defer a.AfterPass()
	}
	a.passMu.Lock()
	defer a.passMu.Unlock()
	node, err := a.node(ctx)
	if apierrors.IsNotFound(err) {
		// Deleted, or not registered yet: its creation brings a pass.
		log.FromContext(ctx).Info("Node not found; waiting for it")
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	nw, desired, err := a.read(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	in, err := a.gather(ctx, nw, desired)
	if err != nil {
		log.FromContext(ctx).Error(err, "Container runtime not answering")
		return ctrl.Result{RequeueAfter: runtimeRetry}, a.reportRuntimeDown(ctx, nw, err)
	}
	in.Taint = a.taintInput(node)
	out := plan.Decide(in)
	taintErr := a.applyTaint(ctx, node, &out)
	signalErr := a.applyNodeSignals(ctx, node, &out)
	next, err := a.apply(ctx, node, nw, &out)
	a.carry.plan = out.State
	return ctrl.Result{RequeueAfter: next}, errors.Join(err, taintErr, signalErr)
}

// runtimeRetry is how soon a pass is retried when the runtime is down.
const runtimeRetry = 5 * time.Second

// read reads what a pass starts from besides the Node: its NodeWarm, and
// what the node wants.
func (a *NodeAgent) read(ctx context.Context, node *corev1.Node) (*warmv1.NodeWarm, plan.Desired, error) {
	nw, err := a.nodeWarm(ctx, node)
	if err != nil {
		return nil, plan.Desired{}, err
	}
	desired, err := a.desired(ctx, node)
	return nw, desired, err
}

func (a *NodeAgent) node(ctx context.Context) (*corev1.Node, error) {
	var node corev1.Node
	if err := a.Client.Get(ctx, types.NamespacedName{Name: a.NodeName}, &node); err != nil {
		return nil, fmt.Errorf("getting node %q: %w", a.NodeName, err)
	}
	return &node, nil
}

// gather reads the rest of what the planner decides from. Its error is
// the runtime's.
func (a *NodeAgent) gather(ctx context.Context, nw *warmv1.NodeWarm, desired plan.Desired) (plan.Input, error) {
	// The runtime is listed first, then the reports taken in, then the
	// engine asked: a pull that ends after the listing is either among the
	// reports (it finished after listedAt: present, only not listed yet)
	// or shows in the engine's view as pending (see planner.image). While
	// the runtime does not answer, reports wait in the inbox.
	listedAt := a.Clock.Now()
	presence, err := a.Engine.Presence(ctx)
	if err != nil {
		return plan.Input{}, err
	}
	started, results := a.inbox.drain()
	a.carry.served.note(results)
	refs := desired.Refs()
	engine := make(map[string]pullengine.Status, len(refs))
	for _, ref := range refs {
		if s, ok := a.Engine.Status(ref); ok {
			engine[ref] = s
		}
	}
	servedStarts, servedByImage := a.carry.served.count(ctx, a.Containers, a.Clock.Now())
	return plan.Input{
		Now: a.Clock.Now(), ListedAt: listedAt, Desired: desired, Runtime: presence, Engine: engine,
		Started: started, Results: results, Disk: a.Engine.DiskUsage(ctx),
		Conditions: nw.Status.Conditions, RuntimeInfo: a.Runtime, CredentialProviders: a.CredentialProviders,
		CredentialKey: ptr.To(a.CredentialKey.Public()), Resync: a.ResyncPeriod,
		PerImageEvents: a.PerImageEvents, State: a.carry.plan,
		Pins: a.pinView(ctx), Marks: a.markView(ctx), ContentUnable: a.ContentUnable, Yield: a.Engine.Yielding(),
		ServedStarts: servedStarts, ServedByImage: servedByImage,
		EvictionBackOff: plan.BackOff{Initial: a.EvictionBackOffInitial, Max: a.EvictionBackOffMax},
		Verification:    a.Verification,
	}, nil
}

func (a *NodeAgent) desired(ctx context.Context, node *corev1.Node) (plan.Desired, error) {
	var list warmv1.ImageWarmList
	// The cache's own objects, not copies: every pass reads them all, and
	// nothing here writes to them.
	if err := a.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return plan.Desired{}, fmt.Errorf("listing ImageWarms: %w", err)
	}
	bounds, err := a.rolloutBounds(ctx)
	if err != nil {
		return plan.Desired{}, err
	}
	a.carry.fleetPulling = plan.FleetPulling(list.Items)
	set, bad := a.carry.memo.Desired(a.NodeName, node.Labels, list.Items, bounds)
	for _, nn := range bad {
		// The API server's validation should make this impossible.
		log.FromContext(ctx).Info("Skipping ImageWarm with an unusable selector", "imagewarm", nn)
	}
	return set, nil
}

// apply carries out a plan: the engine's pulls (with their secrets),
// events, metrics and the NodeWarm status. It returns when the next pass
// is due.
func (a *NodeAgent) apply(ctx context.Context, node *corev1.Node, nw *warmv1.NodeWarm, out *plan.Output) (time.Duration, error) {
	secrets := &secretKeyrings{reader: a.APIReader, ns: cmp.Or(a.SecretNamespace, credbundle.DefaultNamespace), node: a.NodeName,
		key: a.CredentialKey, held: &a.carry.creds, now: a.Clock.Now(), rings: map[types.NamespacedName]*pullengine.Keyring{}}
	reqs := make([]pullengine.Request, 0, len(out.Pulls))
	next := out.Next
	for _, p := range out.Pulls {
		ring, wait := secrets.keyring(ctx, p.Secrets)
		if wait {
			next = min(next, pendingRetry)
			continue
		}
		reqs = append(reqs, pullengine.Request{Image: p.Image, Priority: p.Priority, Timeout: p.Timeout, MissingSince: p.MissingSince,
			Keyring: ring, Tag: p.Scope, Share: p.Share})
	}
	a.Engine.Sync(ctx, reqs)
	out.Applied(secrets.outcomes(), a.applyPins(ctx, out.Pins, out.Unpins))
	a.applyMarks(ctx, out.Marks)
	a.record(ctx, node, out.Events)
	evictionsTotal.Add(float64(out.Evictions))
	setGauges(out.Status)
	wait, err := a.maybeWrite(ctx, nw, out.Status)
	if wait > 0 && wait < next {
		next = wait
	}
	return next, err
}

// poke asks for a pass soon, without blocking: one pending poke is enough.
func (a *NodeAgent) poke() {
	select {
	case a.trigger <- event.GenericEvent{Object: &corev1.Node{}}:
	default:
	}
}
