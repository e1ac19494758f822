package imagewarm

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// fleet is one reconcile's read of the cluster: every node's name and labels,
// and each agent's report by node name. It is built from cache lists taken
// without deep copies, so nothing reachable from it may be modified.
type fleet struct {
	nodes   []metav1.PartialObjectMetadata
	reports map[string]*warmv1.NodeWarm
	// agents is each node's agent as its Pods say (liveness.go); nil
	// when the controller does not watch them.
	agents map[string]agentState
	// now is when the fleet was read.
	now time.Time
}

// newFleet indexes the reports by name once, so that each ImageWarm's
// aggregation is linear in the number of nodes.
func newFleet(nodes []metav1.PartialObjectMetadata, reports []warmv1.NodeWarm) *fleet {
	f := &fleet{nodes: nodes, reports: make(map[string]*warmv1.NodeWarm, len(reports))}
	for i := range reports {
		f.reports[reports[i].Name] = &reports[i]
	}
	return f
}

// aggregateStatus folds the reports of the nodes iw selects into a new status
// for iw. It changes neither iw nor f. The images are spec.images and, with
// imagesFrom, iw.Status.Resolved's, which the reconciler sets to what the
// workloads name now before it folds (imagewarm_workloads.go). The conditions start from iw's, so
// that the ones whose status does not change keep their transition time.
func aggregateStatus(iw *warmv1.ImageWarm, f *fleet) (warmv1.ImageWarmStatus, error) {
	sel, err := iw.Spec.NodeSelector.AsNodeSelector()
	if err != nil {
		return warmv1.ImageWarmStatus{}, fmt.Errorf("parsing the nodeSelector: %w", err)
	}
	t := newTally(iw)
	seen := generationSeen(iw, f.now)
	var waves []rolloutNode
	for i := range f.nodes {
		n := &f.nodes[i]
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		since := silentSince(seen, n)
		var out nodeOutcome
		if down, dead := f.agentDown(n.Name); dead {
			since = metav1.NewTime(down)
			out = t.addDeadAgent(n.Name, since)
		} else {
			out = t.addNode(n.Name, since, f.reports[n.Name])
		}
		if iw.Spec.Rollout != nil {
			waves = append(waves, rolloutNode{name: n.Name, place: int64(warmv1.RolloutPlace(iw.UID, n.Name)),
				outcome: awaitingAgent(out, since, f.now)})
		}
	}
	st := warmv1.ImageWarmStatus{
		ObservedGeneration: iw.Generation,
		Conditions:         slices.Clone(iw.Status.Conditions),
		ImageCount:         int32(len(warmImages(iw))),
		Nodes:              t.nodes,
		Failures:           t.nodeFailures(),
		Resolved:           iw.Status.Resolved,
		SilentNodes:        t.silent.list(),
		// Kept so that a node's silence is dated from the generation's
		// arrival, not from the controller's last restart.
		ObservedGenerationTime: &seen,
	}
	st.ReadyImages, st.Images = t.imageStatuses()
	st.PullProgress = t.progress.status()
	st.ServedStarts = min(t.served, maxFleetServed)
	setRollout(&st, iw, waves)
	setReady(&st, iw)
	setProgressing(&st, iw)
	setDegraded(&st, iw)
	return st, nil
}

// setProgressing sets Progressing: True while some matching node is pulling
// or has yet to report on the current spec. A suspended ImageWarm does not
// progress, whatever its nodes say.
func setProgressing(st *warmv1.ImageWarmStatus, iw *warmv1.ImageWarm) {
	n := st.Nodes
	c := metav1.Condition{Type: warmv1.ConditionProgressing, Status: metav1.ConditionFalse, ObservedGeneration: iw.Generation}
	switch {
	case iw.Spec.Suspend:
		c.Reason, c.Message = warmv1.ReasonSuspended, "suspended; no new pulls"
	case canaryFailed(st):
		// The waiting nodes count as pulling, but nothing moves.
		c.Reason, c.Message = warmv1.ReasonCanaryFailed, "the canary failed; the rollout stopped (see the Rollout condition)"
	case n.Pulling > 0:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonPulling
		c.Message = fmt.Sprintf("%d nodes pulling, %d not reporting", n.Pulling, n.NotReporting)
	case n.NotReporting > 0:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonNotReporting
		c.Message = notReportingText(st, iw)
	case n.Unlisted > 0:
		// Their agents still warm what their reports leave out.
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonImagesNotListed
		c.Message = fmt.Sprintf("%d nodes want more images or ImageWarms than a NodeWarm lists and left some of this ImageWarm's images out of their report", n.Unlisted)
	case n.Matching == 0:
		c.Reason, c.Message = warmv1.ReasonNoMatchingNodes, "the nodeSelector matches no node"
	case n.Failed > 0:
		c.Reason = warmv1.ReasonNodesFailed
		c.Message = fmt.Sprintf("no node is pulling; %d failed", n.Failed)
	default:
		c.Reason, c.Message = warmv1.ReasonAllNodesWarm, "every matching node has every image"
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// setDegraded sets Degraded: True when some matching node failed to pull an
// image, naming the first failure so that `kubectl get -o yaml` shows where
// to look.
func setDegraded(st *warmv1.ImageWarmStatus, iw *warmv1.ImageWarm) {
	n := st.Nodes
	c := metav1.Condition{Type: warmv1.ConditionDegraded, Status: metav1.ConditionFalse, ObservedGeneration: iw.Generation}
	switch {
	case n.Failed > 0 && len(st.Failures) > 0:
		first := st.Failures[0]
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonPullFailed
		c.Message = fmt.Sprintf("%d/%d matching nodes failed to pull an image; first: %s on node %s: %s",
			n.Failed, n.Matching, first.Image, first.Node, first.Reason)
	default:
		c.Reason, c.Message = warmv1.ReasonNoFailures, "no matching node failed to pull an image"
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
