package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// reportState is what the shell keeps of the NodeWarm between passes.
type reportState struct {
	// nodeWarm is the NodeWarm as last read or written; nil to read it
	// again.
	nodeWarm *warmv1.NodeWarm
	// pace is what was written and when, which the planner's pacing
	// decides from.
	pace plan.Report
}

// nodeWarm returns the node's NodeWarm, owned by the Node so it goes with
// it. It is created when missing, found again when deleted (its deletion
// is watched), and given the new Node as owner when the Node was replaced
// under the same name: the garbage collector would otherwise delete it as
// an orphan. The owner's UID says which Node the report was written for:
// a replaced Node may be another machine, whose images and proofs are not
// this one's, so the old report is cleared before the new Node becomes
// the owner. An agent restarting in between then finds a report of
// another Node (not seeded from) or an empty one, never the old machine's
// under the new owner.
func (a *NodeAgent) nodeWarm(ctx context.Context, node *corev1.Node) (*warmv1.NodeWarm, error) {
	nw := a.carry.report.nodeWarm
	if nw == nil || a.gone(ctx, nw) {
		var err error
		if nw, err = a.readOrCreate(ctx, node); err != nil {
			return nil, err
		}
	}
	if !ownedBy(nw, node) {
		if err := a.clearReport(ctx, nw); err != nil {
			a.carry.report.nodeWarm = nil
			return nil, err
		}
		nw.OwnerReferences = ownerRefs(node)
		if err := a.Client.Update(ctx, nw); err != nil {
			a.carry.report.nodeWarm = nil
			return nil, fmt.Errorf("giving NodeWarm %q its new Node as owner: %w", a.NodeName, err)
		}
		log.FromContext(ctx).Info("NodeWarm given the new Node as owner", "uid", node.UID)
	}
	a.carry.report.nodeWarm = nw
	return nw, nil
}

// clearReport empties the status of a NodeWarm written for another Node.
func (a *NodeAgent) clearReport(ctx context.Context, nw *warmv1.NodeWarm) error {
	nw.Status = warmv1.NodeWarmStatus{}
	if err := a.Client.Status().Update(ctx, nw); err != nil {
		return fmt.Errorf("clearing NodeWarm %q, written for the Node this one replaced: %w", a.NodeName, err)
	}
	a.carry.report.pace.Found(nw.Status)
	return nil
}

// gone says whether the cache no longer holds the NodeWarm this agent
// knows, or holds another one of the same name.
func (a *NodeAgent) gone(ctx context.Context, known *warmv1.NodeWarm) bool {
	var cached warmv1.NodeWarm
	err := a.Client.Get(ctx, types.NamespacedName{Name: a.NodeName}, &cached)
	return apierrors.IsNotFound(err) || (err == nil && cached.UID != known.UID)
}

// readOrCreate reads the NodeWarm past the cache, which may lag this
// agent's own create, and creates it when missing. What an earlier run of
// the agent reported counts as reported: an agent restart with nothing
// changed writes nothing. A new NodeWarm has reported nothing. The
// planner's memory, proofs included, is seeded only from a report written
// for this very Node (its UID): a report of a Node replaced under the same
// name, maybe another machine, proves nothing here.
func (a *NodeAgent) readOrCreate(ctx context.Context, node *corev1.Node) (*warmv1.NodeWarm, error) {
	nw := &warmv1.NodeWarm{}
	err := a.APIReader.Get(ctx, types.NamespacedName{Name: a.NodeName}, nw)
	if apierrors.IsNotFound(err) {
		nw = &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: a.NodeName, OwnerReferences: ownerRefs(node)}}
		err = a.Client.Create(ctx, nw)
	}
	if err != nil {
		return nil, fmt.Errorf("getting or creating NodeWarm %q: %w", a.NodeName, err)
	}
	a.carry.report.pace.Found(nw.Status)
	if !a.carry.plan.Seeded() && ownedBy(nw, node) {
		a.carry.plan = plan.Seed(nw.Status, a.Verification)
	}
	return nw, nil
}

func ownerRefs(node *corev1.Node) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
}

func ownedBy(nw *warmv1.NodeWarm, node *corev1.Node) bool {
	for _, o := range nw.OwnerReferences {
		if o.Kind == "Node" && o.UID == node.UID {
			return true
		}
	}
	return false
}

// maybeWrite writes status when it differs from what was last written. A
// settled status (no pull under way) is written at once; progress is
// written once it has waited ProgressInterval since the status first
// changed, so a burst of finished pulls coalesces into one write, a warm
// shorter than the interval costs one write (its result) rather than two,
// and a fleet that starts pulling together does not write together (each
// node's result comes when its own pulls end). Every write also takes a
// token from StatusLimiter. It returns how long to wait before trying a
// deferred write again.
func (a *NodeAgent) maybeWrite(ctx context.Context, nw *warmv1.NodeWarm, status warmv1.NodeWarmStatus) (time.Duration, error) {
	wait, due := a.writeDue(status, a.Clock.Now())
	if !due {
		return wait, nil
	}
	return 0, a.write(ctx, nw, status)
}

// writeDue says whether status is to be written now, or else how long to
// wait (0: nothing to write): when the planner's pacing says so, and when
// StatusLimiter has a token.
func (a *NodeAgent) writeDue(status warmv1.NodeWarmStatus, now time.Time) (time.Duration, bool) {
	wait, due := a.carry.report.pace.Due(status, now, plan.Pacing{Interval: a.ProgressInterval, Bytes: plan.BytesPace(a.carry.fleetPulling, a.PullProgressInterval), Served: a.ServedInterval, Retries: a.RetryInterval})
	if wait > 0 {
		nodeWarmWrites.WithLabelValues("deferred").Inc()
	}
	if !due {
		return wait, false
	}
	if a.StatusLimiter != nil && !a.StatusLimiter.TryAccept() {
		nodeWarmWrites.WithLabelValues("throttled").Inc()
		return time.Duration(float64(time.Second) / float64(a.StatusLimiter.QPS())), false
	}
	return 0, true
}

func (a *NodeAgent) write(ctx context.Context, nw *warmv1.NodeWarm, status warmv1.NodeWarmStatus) error {
	nw.Status = status
	if err := a.Client.Status().Update(ctx, nw); err != nil {
		nodeWarmWrites.WithLabelValues("error").Inc()
		// Conflict (someone else wrote it) or NotFound (deleted): read it
		// again on the next pass.
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			a.carry.report.nodeWarm = nil
		}
		return fmt.Errorf("writing NodeWarm %q status: %w", a.NodeName, err)
	}
	nodeWarmWrites.WithLabelValues("ok").Inc()
	// The answer has every time cut to the second. The next pass builds
	// on these conditions, and compares with reported: both must be the
	// status as computed, or the first pass after a condition changed
	// would find a difference in the nanoseconds and write the same
	// status again.
	nw.Status = status
	a.carry.report.pace.Wrote(status, a.Clock.Now())
	log.FromContext(ctx).V(1).Info("Wrote NodeWarm status", "desired", status.Desired, "present", status.Present,
		"pulling", status.Pulling, "failed", status.Failed)
	return nil
}

// reportRuntimeDown marks the runtime as not answering, keeping the rest
// of the last report.
func (a *NodeAgent) reportRuntimeDown(ctx context.Context, nw *warmv1.NodeWarm, cause error) error {
	last := a.carry.report.pace.Last()
	if last == nil {
		last = &nw.Status
	}
	status := plan.RuntimeDown(*last, cause, a.Clock.Now())
	// A report of the agent's earlier run carries its earlier key: publish
	// this run's, so its credentials are sealed to it while CRI is down.
	status.CredentialKey = ptr.To(a.CredentialKey.Public())
	_, err := a.maybeWrite(ctx, nw, status)
	return err
}
