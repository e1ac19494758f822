package warmerctl

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Phase is where one node stands with one ImageWarm's images.
type Phase string

// The phases, in the order a person wants to read about them.
const (
	PhaseFailed    Phase = "Failed"
	PhasePulling   Phase = "Pulling"
	PhaseYielding  Phase = "Yielding"
	PhaseQueued    Phase = "Queued"
	PhaseWaiting   Phase = "Waiting"
	PhaseSuspended Phase = "Suspended"
	PhaseReady     Phase = "Ready"
)

// Summary is one ImageWarm as a person reads it: its conditions and
// counts from its status, and each node's part from the NodeWarms.
type Summary struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is the Ready condition, for the spec's current generation.
	Ready        bool   `json:"ready"`
	ReadyReason  string `json:"readyReason,omitempty"`
	ReadyMessage string `json:"readyMessage,omitempty"`
	// Current is false while the status describes an older generation.
	Current      bool                      `json:"current"`
	Images       int32                     `json:"images"`
	ReadyImages  int32                     `json:"readyImages"`
	Nodes        warmv1.NodeCounts         `json:"nodes"`
	Bytes        Bytes                     `json:"bytes"`
	SecondsLeft  *int64                    `json:"secondsLeft,omitempty"`
	ServedStarts int64                     `json:"servedStarts,omitempty"`
	Rollout      *warmv1.RolloutStatus     `json:"rollout,omitempty"`
	Conditions   []metav1.Condition        `json:"conditions,omitempty"`
	Silent       []warmv1.SilentNode       `json:"silentNodes,omitempty"`
	Unresolved   []warmv1.ImageFleetStatus `json:"imagesNotEverywhere,omitempty"`
	// Working are the nodes not yet warm, slowest first.
	Working []NodeProgress `json:"working,omitempty"`
	// Failures group the failing images by reason.
	Failures []FailureGroup `json:"failures,omitempty"`
	// PullSecrets are the secrets the spec names, by name.
	PullSecrets []string `json:"pullSecrets,omitempty"`
	// Warm counts the reporting nodes that have every image.
	Warm int `json:"warm"`
}

// Bytes is how far pulls have come, in compressed bytes.
type Bytes struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// Left is the bytes still to come.
func (b Bytes) Left() int64 { return max(b.Total-b.Done, 0) }

// Fraction is Done over Total, 0 without a total.
func (b Bytes) Fraction() float64 {
	if b.Total <= 0 {
		return 0
	}
	return min(float64(b.Done)/float64(b.Total), 1)
}

// NodeProgress is one node's part in one ImageWarm.
type NodeProgress struct {
	Node  string `json:"node"`
	Phase Phase  `json:"phase"`
	// Images counts the ImageWarm's images the node lists; Present those
	// it has.
	Images      int    `json:"images"`
	Present     int    `json:"present"`
	Bytes       Bytes  `json:"bytes"`
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
	// PullPhase is what its pulls do: Downloading while any downloads,
	// else Unpacking; empty where its agent says no phase.
	PullPhase warmv1.PullPhase `json:"pullPhase,omitempty"`
	// DiskPressure is the reason of the node's DiskPressure condition
	// while it holds pulls back.
	DiskPressure string `json:"diskPressure,omitempty"`
}

// Rate is the bytes a second the node's estimate implies, 0 without one.
func (n NodeProgress) Rate() int64 {
	if n.SecondsLeft == nil || *n.SecondsLeft <= 0 {
		return 0
	}
	return n.Bytes.Left() / *n.SecondsLeft
}

// Summarise folds an ImageWarm and the NodeWarms (any of them: those
// that do not list it are skipped) into a Summary. It reads no clock:
// the times shown are the objects' own.
func Summarise(iw *warmv1.ImageWarm, nodeWarms []warmv1.NodeWarm) Summary {
	st := &iw.Status
	s := Summary{
		Namespace: iw.Namespace, Name: iw.Name,
		Current: st.ObservedGeneration == iw.Generation,
		Images:  st.ImageCount, ReadyImages: st.ReadyImages, Nodes: st.Nodes,
		ServedStarts: st.ServedStarts, Rollout: st.Rollout, Conditions: st.Conditions,
		Silent: st.SilentNodes, Unresolved: st.Images,
	}
	for _, ps := range iw.Spec.ImagePullSecrets {
		s.PullSecrets = append(s.PullSecrets, ps.Name)
	}
	if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionReady); c != nil {
		s.Ready = c.Status == metav1.ConditionTrue && s.Current
		s.ReadyReason, s.ReadyMessage = c.Reason, c.Message
	}
	failures := map[string]*FailureGroup{}
	for i := range nodeWarms {
		n, ok := nodePart(&nodeWarms[i], iw, failures)
		if !ok {
			continue
		}
		if n.Phase == PhaseReady {
			s.Warm++
			continue
		}
		s.Bytes.Done += n.Bytes.Done
		s.Bytes.Total += n.Bytes.Total
		if n.SecondsLeft != nil && (s.SecondsLeft == nil || *n.SecondsLeft > *s.SecondsLeft) {
			s.SecondsLeft = n.SecondsLeft
		}
		s.Working = append(s.Working, n)
	}
	slices.SortFunc(s.Working, slowestFirst)
	s.Failures = sortedGroups(failures)
	if s.Ready && s.Nodes.Pulling == 0 && s.Nodes.Failed == 0 {
		// The controller folded newer reports than a watch may have
		// brought yet: no node is working or failing.
		s.Working, s.Bytes, s.SecondsLeft, s.Failures = nil, Bytes{}, nil, nil
	}
	return s
}

// slowestFirst orders nodes by time left, longest first; nodes without
// an estimate by bytes left; then failed before the rest, then by name.
func slowestFirst(a, b NodeProgress) int {
	if c := cmp.Compare(secondsOr(b), secondsOr(a)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Bytes.Left(), a.Bytes.Left()); c != 0 {
		return c
	}
	if c := cmp.Compare(phaseRank(a.Phase), phaseRank(b.Phase)); c != 0 {
		return c
	}
	return cmp.Compare(a.Node, b.Node)
}

func secondsOr(n NodeProgress) int64 {
	if n.SecondsLeft == nil {
		return -1
	}
	return *n.SecondsLeft
}

var phases = []Phase{PhaseFailed, PhasePulling, PhaseYielding, PhaseQueued, PhaseWaiting, PhaseSuspended, PhaseReady}

func phaseRank(p Phase) int { return slices.Index(phases, p) }

// warmIndex is the index of iw in a NodeWarm's warms, -1 if absent.
func warmIndex(st *warmv1.NodeWarmStatus, iw *warmv1.ImageWarm) int32 {
	for i, w := range st.Warms {
		if w.Namespace == iw.Namespace && w.Name == iw.Name {
			return int32(i)
		}
	}
	return -1
}

// nodePart is one NodeWarm's part in iw, false when it does not list iw.
// Failed images are added to failures by reason.
func nodePart(nw *warmv1.NodeWarm, iw *warmv1.ImageWarm, failures map[string]*FailureGroup) (NodeProgress, bool) {
	st := &nw.Status
	idx := warmIndex(st, iw)
	if idx < 0 {
		return NodeProgress{}, false
	}
	n := NodeProgress{Node: nw.Name, Phase: PhaseReady}
	for i := range st.Images {
		img := &st.Images[i]
		if !slices.Contains(img.Warms, idx) {
			continue
		}
		n.Images++
		addImage(&n, img)
		if img.State == warmv1.ImageFailed || img.State == warmv1.ImageBackOff {
			addFailure(failures, nw.Name, img)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionDiskPressure); c != nil && c.Status == metav1.ConditionTrue && n.Phase != PhaseReady {
		n.DiskPressure = c.Reason
	}
	if n.Phase == PhasePulling || n.Phase == PhaseQueued {
		if c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionYielding); c != nil && c.Status == metav1.ConditionTrue {
			n.Phase = PhaseYielding
		}
	}
	return n, true
}

// addImage folds one image into its node's part: the node takes the
// most pressing phase of its images.
func addImage(n *NodeProgress, img *warmv1.NodeImage) {
	p := imagePhase(img)
	if p == PhaseReady {
		n.Present++
	}
	if phaseRank(p) < phaseRank(n.Phase) {
		n.Phase = p
	}
	if pr := img.Progress; pr != nil && img.State == warmv1.ImagePulling {
		n.Bytes.Done += pr.BytesDone
		n.Bytes.Total += pr.BytesTotal
		if pr.SecondsLeft != nil && (n.SecondsLeft == nil || *pr.SecondsLeft > *n.SecondsLeft) {
			n.SecondsLeft = pr.SecondsLeft
		}
		if ph := warmv1.PhaseOf(pr); ph == warmv1.PullPhaseDownloading || n.PullPhase == "" {
			n.PullPhase = ph
		}
	}
}

func imagePhase(img *warmv1.NodeImage) Phase {
	switch img.State {
	case warmv1.ImagePresent:
		return PhaseReady
	case warmv1.ImagePulling:
		return PhasePulling
	case warmv1.ImageFailed, warmv1.ImageBackOff:
		return PhaseFailed
	case warmv1.ImageSkipped:
		return PhaseSuspended
	}
	if img.Reason == warmv1.ReasonWaitingForRollout {
		return PhaseWaiting
	}
	return PhaseQueued
}
