package imagewarm

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// fiveNodes are n1..n5 at places 10..50 with the given states.
func fiveNodes(states ...nodeState) []rolloutNode {
	out := make([]rolloutNode, len(states))
	for i, s := range states {
		out[i] = rolloutNode{name: "n" + string(rune('1'+i)), place: int64(10 * (i + 1)), outcome: nodeOutcome{state: s}}
		if s == nodeFailed {
			out[i].outcome.image, out[i].outcome.reason = "registry.example/app:v9", "NotFound"
		}
	}
	return out
}

func rolloutWarm(gen int64, maxPulling *intstr.IntOrString, canary bool, prev *warmv1.RolloutStatus) *warmv1.ImageWarm {
	iw := iwNewWarm(gen, nil, "registry.example/app:v9")
	iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: maxPulling, Canary: canary}
	iw.Status.Rollout = prev
	return iw
}

func num(n int) *intstr.IntOrString        { v := intstr.FromInt32(int32(n)); return &v }
func percent(p string) *intstr.IntOrString { v := intstr.FromString(p); return &v }

// TestRollout is the controller's bound: the order of places, percentages,
// finished nodes taking no slot, failures giving theirs up, a canary
// stopping the rollout, and a new spec starting again.
func TestRollout(t *testing.T) {
	const P, R, F, U, N = nodePulling, nodeReady, nodeFailed, nodeUnsupported, nodeNoAgent
	at := func(gen, bound int64) *warmv1.RolloutStatus {
		return &warmv1.RolloutStatus{Generation: gen, AdmittedBelow: bound}
	}
	cases := []struct {
		name                string
		iw                  *warmv1.ImageWarm
		nodes               []rolloutNode
		bound               int64
		admitted, waiting   int32
		reason, messagePart string
	}{
		{"two at a time from the lowest place", rolloutWarm(1, num(2), false, nil), fiveNodes(P, P, P, P, P), 21, 2, 3, warmv1.ReasonWaves, "maxPulling 2: 2"},
		{"a percentage rounds up", rolloutWarm(1, percent("30%"), false, nil), fiveNodes(P, P, P, P, P), 21, 2, 3, warmv1.ReasonWaves, "maxPulling 30%: 2"},
		{"a small percentage is still one node", rolloutWarm(1, percent("1%"), false, nil), fiveNodes(P, P, P, P, P), 11, 1, 4, warmv1.ReasonWaves, ""},
		{"nodes that have every image take no slot", rolloutWarm(1, num(1), false, nil), fiveNodes(R, R, P, P, P), 31, 3, 2, warmv1.ReasonWaves, ""},
		{"nodes without an agent or the platform take no slot", rolloutWarm(1, num(1), false, nil), fiveNodes(N, U, P, P, P), 31, 3, 2, warmv1.ReasonWaves, ""},
		{"slots stay taken while admitted nodes pull", rolloutWarm(1, num(2), false, at(1, 21)), fiveNodes(P, P, P, P, P), 21, 2, 3, warmv1.ReasonWaves, ""},
		{"finished and failed nodes give their slots up", rolloutWarm(1, num(2), false, at(1, 21)), fiveNodes(R, F, P, P, P), 41, 4, 1, warmv1.ReasonWaves, ""},
		{"the last wave admits everyone", rolloutWarm(1, num(2), false, at(1, 41)), fiveNodes(R, R, R, R, P), 51, 5, 0, warmv1.ReasonAllAdmitted, "(5)"},
		{"the bound never goes down", rolloutWarm(1, num(1), false, at(1, 51)), fiveNodes(P, P, P, P, P), 51, 5, 0, warmv1.ReasonAllAdmitted, ""},
		{"an older generation's bound starts again", rolloutWarm(2, num(1), false, at(1, 51)), fiveNodes(P, P, P, P, P), 11, 1, 4, warmv1.ReasonWaves, ""},
		{"a canary first", rolloutWarm(1, num(3), true, nil), fiveNodes(P, P, P, P, P), 11, 1, 4, warmv1.ReasonCanaryPulling, "canary node n1 is pulling; 4 nodes wait"},
		{"a canary without maxPulling", rolloutWarm(1, nil, true, nil), fiveNodes(P, P, P, P, P), 11, 1, 4, warmv1.ReasonCanaryPulling, ""},
		{"a failed canary stops the rollout", rolloutWarm(1, num(3), true, at(1, 11)), fiveNodes(F, P, P, P, P), 11, 1, 4, warmv1.ReasonCanaryFailed,
			"canary node n1 failed to pull registry.example/app:v9: NotFound; the rollout stopped, 4 nodes wait"},
		{"a canary that succeeded lets maxPulling through", rolloutWarm(1, num(3), true, at(1, 11)), fiveNodes(R, P, P, P, P), 41, 4, 1, warmv1.ReasonWaves, ""},
		{"a canary that succeeded, no maxPulling", rolloutWarm(1, nil, true, at(1, 11)), fiveNodes(R, P, P, P, P), 51, 5, 0, warmv1.ReasonAllAdmitted, ""},
		{"a node that already had the images proves the images", rolloutWarm(1, num(1), true, nil), fiveNodes(R, P, P, P, P), 21, 2, 3, warmv1.ReasonWaves, ""},
		{"a new spec after a failed canary starts again", rolloutWarm(2, num(3), true, at(1, 11)), fiveNodes(P, P, P, P, P), 11, 1, 4, warmv1.ReasonCanaryPulling, ""},
		{"no node", rolloutWarm(1, num(1), true, nil), nil, 0, 0, 0, warmv1.ReasonAllAdmitted, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes := slices.Clone(c.nodes)
			rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
			st, cond := rollout(c.iw, nodes)
			if st.AdmittedBelow != c.bound || st.Admitted != c.admitted || st.Waiting != c.waiting || st.Generation != c.iw.Generation {
				t.Errorf("got %+v, want bound %d, admitted %d, waiting %d", *st, c.bound, c.admitted, c.waiting)
			}
			if cond.Reason != c.reason || !strings.Contains(cond.Message, c.messagePart) {
				t.Errorf("condition %s %q, want reason %s with %q", cond.Reason, cond.Message, c.reason, c.messagePart)
			}
			if want := c.reason == warmv1.ReasonAllAdmitted; (cond.Status == metav1.ConditionTrue) != want {
				t.Errorf("condition status %s with reason %s", cond.Status, cond.Reason)
			}
		})
	}
}

// TestRolloutResolvedImages: a new set of images resolved from workloads
// starts a new rollout, as a new generation does.
func TestRolloutResolvedImages(t *testing.T) {
	iw := rolloutWarm(1, num(1), false, &warmv1.RolloutStatus{Generation: 1, Resolved: "aaaa", AdmittedBelow: 51})
	iw.Spec.ImagesFrom = &warmv1.ImagesFrom{}
	iw.Status.Resolved = &warmv1.ResolvedImages{Hash: "bbbb"}
	st, _ := rollout(iw, fiveNodes(nodePulling, nodePulling, nodePulling, nodePulling, nodePulling))
	if st.AdmittedBelow != 11 || st.Resolved != "bbbb" {
		t.Fatalf("got %+v, want a new rollout for bbbb admitting n1", *st)
	}
}

// TestAggregateRollout folds real reports: the nodes wait (Queued,
// WaitingForRollout) and the lowest place is admitted; a failed canary
// stops Progressing; without spec.rollout the status has no trace of it.
func TestAggregateRollout(t *testing.T) {
	const image = "registry.example/app:v9"
	names := []string{"a", "b", "c"}
	iw := rolloutWarm(1, num(1), true, nil)
	iw.UID = "3f1c"
	first := slices.MinFunc(names, func(a, b string) int {
		return cmp.Compare(warmv1.RolloutPlace(iw.UID, a), warmv1.RolloutPlace(iw.UID, b))
	})
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for _, n := range names {
		nodes = append(nodes, iwNodeMeta(n))
		reports = append(reports, iwReport(n, iwWebAt(1), iwFailing(image, warmv1.ImageQueued, "WaitingForRollout", "")))
	}
	st, err := aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	if st.Rollout == nil || st.Rollout.AdmittedBelow != int64(warmv1.RolloutPlace(iw.UID, first))+1 || st.Rollout.Admitted != 1 || st.Rollout.Waiting != 2 {
		t.Fatalf("rollout %+v, want only %s admitted", st.Rollout, first)
	}
	iw.Status = st
	for i := range reports {
		if reports[i].Name == first {
			reports[i] = iwReport(first, iwWebAt(1), iwFailing(image, warmv1.ImageBackOff, "NotFound", "not found"))
		}
	}
	st, err = aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	roll := meta.FindStatusCondition(st.Conditions, warmv1.ConditionRollout)
	prog := meta.FindStatusCondition(st.Conditions, warmv1.ConditionProgressing)
	if roll == nil || roll.Reason != warmv1.ReasonCanaryFailed || !strings.Contains(roll.Message, first) || prog.Reason != warmv1.ReasonCanaryFailed || st.Rollout.Admitted != 1 {
		t.Fatalf("after the canary failed: rollout %+v, conditions %+v", st.Rollout, st.Conditions)
	}
	iw.Status, iw.Spec.Rollout = st, nil
	st, err = aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	if st.Rollout != nil || meta.FindStatusCondition(st.Conditions, warmv1.ConditionRollout) != nil {
		t.Fatalf("without spec.rollout: rollout %+v, conditions %+v", st.Rollout, st.Conditions)
	}
}

// TestRolloutAwaitsAgents: a matching node with no NodeWarm yet takes a
// slot for AgentGrace, so an agent that starts a moment after the
// ImageWarm does not pull beside a full wave; after the grace the
// rollout passes over it.
func TestRolloutAwaitsAgents(t *testing.T) {
	const image = "registry.example/app:v9"
	names := []string{"a", "b", "c"}
	iw := rolloutWarm(1, num(1), false, nil)
	iw.UID = "3f1c"
	order := slices.Clone(names)
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Compare(warmv1.RolloutPlace(iw.UID, a), warmv1.RolloutPlace(iw.UID, b))
	})
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for _, n := range names {
		nodes = append(nodes, iwNodeMeta(n))
		if n != order[0] { // the first in order has no agent yet
			reports = append(reports, iwReport(n, iwWebAt(1), iwFailing(image, warmv1.ImageQueued, "WaitingForRollout", "")))
		}
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name              string
		silent            time.Duration
		bound             int64
		admitted, waiting int32
	}{
		{"within the grace the silent node holds the slot", AgentGrace - time.Second, int64(warmv1.RolloutPlace(iw.UID, order[0])) + 1, 1, 2},
		{"after the grace the next node gets it", AgentGrace, int64(warmv1.RolloutPlace(iw.UID, order[1])) + 1, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := iw.DeepCopy()
			seen := metav1.NewTime(now.Add(-c.silent))
			w.Status.ObservedGeneration, w.Status.ObservedGenerationTime = w.Generation, &seen
			f := newFleet(nodes, reports)
			f.now = now
			st, err := aggregateStatus(w, f)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Rollout; r == nil || r.AdmittedBelow != c.bound || r.Admitted != c.admitted || r.Waiting != c.waiting {
				t.Fatalf("rollout %+v, want bound %d, %d admitted, %d waiting", r, c.bound, c.admitted, c.waiting)
			}
		})
	}
}
