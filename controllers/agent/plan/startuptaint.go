package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The startup taint, decided. A node may register with a taint (by default
// warmer.dev/warming:NoSchedule) that keeps Pods off it until the agent
// removes it: once every ImageWarm that selects the node and asks for it
// (spec.startupTaint, not suspended) has all its images present there, or
// at the deadline, counted from the Node's creation, whichever is first.
// The agent only ever removes the taint, never adds it, so it is removed
// once; a restarted agent finds it gone and does nothing, or finds it
// still there and decides again with the same deadline.
//
// A tainted node that no ImageWarm asks to hold is freed on the agent's
// first pass: the agent's cache has synced by then (controller-runtime
// starts reconciling only after it has), so "no ImageWarm asks" is the
// cluster's answer, not an empty cache's. Holding such a node until the
// deadline would only keep it out of service for nothing.

// TaintInput is what the planner knows of the node's startup taint.
type TaintInput struct {
	// Key is the taint's key; "" turns the feature off.
	Key string
	// OnNode is set when the Node carries a taint with that key.
	OnNode bool
	// Deadline is when the taint goes whatever the images' state: the
	// Node's creation plus the agent's --startup-taint-deadline.
	Deadline time.Time
}

// maxNamedWarms bounds the ImageWarms a StartupTaint message names.
const maxNamedWarms = 3

// startupTaint decides whether to remove the node's startup taint, from the
// ImageWarms that hold it and are not warm (cold), and sets the
// StartupTaint condition on conds.
func (p *planner) startupTaint(conds []metav1.Condition, cold []types.NamespacedName, now metav1.Time) []metav1.Condition {
	t := p.in.Taint
	if t.Key == "" {
		return conds
	}
	prev := meta.FindStatusCondition(p.in.Conditions, warmv1.ConditionStartupTaint)
	c := metav1.Condition{Type: warmv1.ConditionStartupTaint, Status: metav1.ConditionFalse}
	switch {
	case !t.OnNode && prev == nil:
		return conds // never tainted, as far as this agent knows
	case !t.OnNode && prev.Status != metav1.ConditionFalse:
		c.Reason, c.Message = warmv1.ReasonTaintRemovedElsewhere, fmt.Sprintf("Taint %s was removed by someone else while the agent held it", t.Key)
	case !t.OnNode:
		c = *prev // removed earlier: keep saying how
	case len(p.in.Desired.holdTaint) == 0:
		p.out.RemoveTaint = true
		c.Reason, c.Message = warmv1.ReasonTaintNotRequested, fmt.Sprintf("No ImageWarm selecting this node asks to hold taint %s; removed", t.Key)
	case len(cold) == 0:
		p.out.RemoveTaint = true
		c.Reason, c.Message = warmv1.ReasonTaintRemoved, fmt.Sprintf("Every image of the %d ImageWarms holding taint %s is present; removed", len(p.in.Desired.holdTaint), t.Key)
		p.event(eventTaintRemoved(t.Key))
	case !p.in.Now.Before(t.Deadline):
		p.out.RemoveTaint = true
		c.Reason, c.Message = warmv1.ReasonTaintDeadlineExceeded, fmt.Sprintf("Deadline %s passed with %s not warm; taint %s removed", t.Deadline.UTC().Format(time.RFC3339), namedWarms(cold), t.Key)
		p.event(eventTaintDeadline(t.Key, cold))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonTaintWaiting
		c.Message = fmt.Sprintf("Holding taint %s, at most until %s, for %s not warm yet", t.Key, t.Deadline.UTC().Format(time.RFC3339), namedWarms(cold))
		p.soon(t.Deadline.Sub(p.in.Now))
	}
	return setCondition(conds, c, now)
}

// coldWarms are the ImageWarms holding the taint that are not warm: some
// image of theirs is not done (present, with no pull of it unaccounted
// for). An image that does not parse never warms; the API server's
// validation keeps such images out, and the deadline frees the node anyway.
func (p *planner) coldWarms(done map[string]bool) []types.NamespacedName {
	if !p.in.Taint.OnNode || len(p.in.Desired.holdTaint) == 0 {
		return nil
	}
	cold := map[types.NamespacedName]bool{}
	for key, w := range p.in.Desired.images {
		if done[key] {
			continue
		}
		for _, nn := range w.warms {
			if p.in.Desired.holdTaint[nn] {
				cold[nn] = true
			}
		}
	}
	for _, bad := range p.in.Desired.invalid {
		if p.in.Desired.holdTaint[bad.warm] {
			cold[bad.warm] = true
		}
	}
	out := make([]types.NamespacedName, 0, len(cold))
	for nn := range cold {
		out = append(out, nn)
	}
	slices.SortFunc(out, nnCompare)
	return out
}

// namedWarms names a few ImageWarms, and counts the rest.
func namedWarms(nns []types.NamespacedName) string {
	names := make([]string, 0, maxNamedWarms)
	for _, nn := range nns[:min(len(nns), maxNamedWarms)] {
		names = append(names, nn.String())
	}
	s := "ImageWarm " + strings.Join(names, ", ")
	if len(nns) > 1 {
		s = "ImageWarms " + strings.Join(names, ", ")
	}
	if more := len(nns) - maxNamedWarms; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// TaintNotRemoved amends a plan whose taint removal the API server
// refused: the removal's events are dropped (nothing was removed) and the
// StartupTaint condition says the removal failed. The next pass decides
// again.
func (o *Output) TaintNotRemoved(key string, err error, now time.Time) {
	o.Events = slices.DeleteFunc(o.Events, func(e Event) bool {
		return e.Reason == warmv1.ReasonStartupTaintRemoved || e.Reason == warmv1.ReasonStartupTaintDeadline
	})
	o.Status.Conditions = setCondition(o.Status.Conditions, metav1.Condition{
		Type: warmv1.ConditionStartupTaint, Status: metav1.ConditionTrue, Reason: warmv1.ReasonTaintRemoveFailed,
		Message: truncate.String(fmt.Sprintf("Removing taint %s failed: %v", key, err), warmv1.MaxMessageLength),
	}, metav1.NewTime(now))
}
