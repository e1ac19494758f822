package imagewarm

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// AgentGrace is how long a rollout waits for the first report of a
// matching node that has no NodeWarm yet (its agent is starting, or the
// node has none) before it passes over the node. Until then the node
// takes a slot like a pulling one: an agent that comes up a moment after
// the ImageWarm must not find itself admitted beside a full wave.
const AgentGrace = time.Minute

// rolloutRecheck is how often the controller looks at a rollout with
// waiting nodes even when no report changes, so that a grace that ran
// out frees its slot.
const rolloutRecheck = 15 * time.Second

// awaitingAgent is a node's outcome as its rollout sees it: a node with no
// NodeWarm silent for less than AgentGrace since (see silentSince) counts
// as pulling.
func awaitingAgent(out nodeOutcome, since metav1.Time, now time.Time) nodeOutcome {
	if out.state == nodeNoAgent && now.Sub(since.Time) < AgentGrace {
		out.state = nodePulling
	}
	return out
}

// rolloutNode is one matching node in rollout order.
type rolloutNode struct {
	name    string
	place   int64
	outcome nodeOutcome
}

// rollout decides how far iw's rollout may go now, given every matching
// node's outcome (in any order; nodes is sorted in place). It only ever
// raises the bound it finds in iw's status for the same spec, so a node
// once admitted stays admitted; a new spec (generation or resolved images)
// starts again from no node. Walking the nodes in order from the bound, it
// passes over the finished ones (every image present, failed, or the
// platform lacking: they take no slot) and admits unfinished ones while
// fewer than the limit are admitted and unfinished: maxPulling, or one
// while a canary has not succeeded. A failed node stops a canary rollout
// until a node below the bound has every image.
func rollout(iw *warmv1.ImageWarm, nodes []rolloutNode) (*warmv1.RolloutStatus, metav1.Condition) {
	slices.SortFunc(nodes, func(a, b rolloutNode) int {
		return cmp.Or(cmp.Compare(a.place, b.place), strings.Compare(a.name, b.name))
	})
	w := &wave{spec: iw.Spec.Rollout, limit: maxPulling(iw.Spec.Rollout, len(nodes))}
	st := &warmv1.RolloutStatus{Generation: iw.Generation, Resolved: iw.ResolvedHash()}
	if prev := iw.Status.Rollout; prev != nil && prev.Generation == st.Generation && prev.Resolved == st.Resolved {
		st.AdmittedBelow = prev.AdmittedBelow
	}
	next := 0
	for ; next < len(nodes) && nodes[next].place < st.AdmittedBelow; next++ {
		w.count(&nodes[next])
	}
	for ; next < len(nodes) && !w.stopped(); next++ {
		n := &nodes[next]
		if n.place >= st.AdmittedBelow && n.outcome.state == nodePulling && w.full() {
			break
		}
		w.count(n)
		st.AdmittedBelow = max(st.AdmittedBelow, n.place+1)
	}
	for _, n := range nodes {
		switch {
		case n.place < st.AdmittedBelow:
			st.Admitted++
		case n.outcome.state == nodePulling:
			st.Waiting++
		}
	}
	return st, w.condition(iw, st)
}

// wave tallies the admitted nodes of one rollout.
type wave struct {
	spec  *warmv1.Rollout
	limit int
	// pulling counts admitted nodes that lack an image.
	pulling int
	// proven is set once an admitted node has every image.
	proven bool
	// first is the first admitted node, the canary; failed the first
	// admitted node that failed.
	first, failed *rolloutNode
}

func (w *wave) count(n *rolloutNode) {
	if w.first == nil {
		w.first = n
	}
	switch n.outcome.state {
	case nodePulling:
		w.pulling++
	case nodeReady:
		w.proven = true
	case nodeFailed:
		if w.failed == nil {
			w.failed = n
		}
	}
}

// canaryPending says whether the canary has not succeeded yet.
func (w *wave) canaryPending() bool { return w.spec.Canary && !w.proven }

// stopped says whether the rollout stops where it is: its canary failed.
func (w *wave) stopped() bool { return w.canaryPending() && w.failed != nil }

// full says whether no more unfinished node may be admitted.
func (w *wave) full() bool {
	if w.canaryPending() {
		return w.pulling >= 1
	}
	return w.pulling >= w.limit
}

// maxPulling is spec.rollout.maxPulling scaled to the matching nodes
// (percentages rounded up), at least one; no bound when it is unset.
func maxPulling(r *warmv1.Rollout, matching int) int {
	if r.MaxPulling == nil {
		return math.MaxInt
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(r.MaxPulling, matching, true)
	if err != nil {
		return 1 // the API's validation rules this out
	}
	return max(v, 1)
}

// condition is the Rollout condition for where the rollout stands.
func (w *wave) condition(iw *warmv1.ImageWarm, st *warmv1.RolloutStatus) metav1.Condition {
	c := metav1.Condition{Type: warmv1.ConditionRollout, Status: metav1.ConditionFalse, ObservedGeneration: iw.Generation}
	switch {
	case w.stopped():
		f := w.failed.outcome
		c.Reason = warmv1.ReasonCanaryFailed
		c.Message = fmt.Sprintf("canary node %s failed to pull %s: %s; the rollout stopped, %d nodes wait; a new spec starts a new rollout",
			w.failed.name, f.image, f.reason, st.Waiting)
	case st.Waiting == 0:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonAllAdmitted
		c.Message = fmt.Sprintf("every matching node is admitted (%d)", st.Admitted)
	case w.canaryPending():
		c.Reason = warmv1.ReasonCanaryPulling
		c.Message = fmt.Sprintf("canary node %s is pulling; %d nodes wait for it", w.first.name, st.Waiting)
	default:
		c.Reason = warmv1.ReasonWaves
		c.Message = fmt.Sprintf("%d nodes admitted, %d of them pulling (maxPulling %s: %d); %d nodes wait",
			st.Admitted, w.pulling, w.spec.MaxPulling, w.limit, st.Waiting)
	}
	return c
}

// setRollout sets status.rollout and the Rollout condition from the
// matching nodes; without spec.rollout it removes them.
func setRollout(st *warmv1.ImageWarmStatus, iw *warmv1.ImageWarm, nodes []rolloutNode) {
	if iw.Spec.Rollout == nil {
		st.Rollout = nil
		meta.RemoveStatusCondition(&st.Conditions, warmv1.ConditionRollout)
		return
	}
	var c metav1.Condition
	st.Rollout, c = rollout(iw, nodes)
	meta.SetStatusCondition(&st.Conditions, c)
}

// canaryFailed says whether st's rollout stopped on a failed canary.
func canaryFailed(st *warmv1.ImageWarmStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionRollout)
	return c != nil && c.Reason == warmv1.ReasonCanaryFailed
}
