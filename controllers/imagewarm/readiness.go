package imagewarm

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// namedSilentNodes is how many silent nodes a condition message names; the
// status lists more.
const namedSilentNodes = 3

// silentNodes keeps the first MaxReportedSilentNodes silent nodes by name,
// whatever order they come in.
type silentNodes []warmv1.SilentNode

func (s *silentNodes) add(node string, since metav1.Time) {
	pos := sort.Search(len(*s), func(k int) bool { return (*s)[k].Node > node })
	if pos >= warmv1.MaxReportedSilentNodes {
		return
	}
	if len(*s) < warmv1.MaxReportedSilentNodes {
		*s = append(*s, warmv1.SilentNode{})
	}
	copy((*s)[pos+1:], (*s)[pos:]) // drops the last when full
	(*s)[pos] = warmv1.SilentNode{Node: node, Since: since}
}

// list is the status's list, nil when empty, as the API server returns it.
func (s silentNodes) list() []warmv1.SilentNode {
	if len(s) == 0 {
		return nil
	}
	return s
}

// generationSeen is when the controller first saw iw's current generation:
// kept from the status while the generation stays, now when it is new.
func generationSeen(iw *warmv1.ImageWarm, now time.Time) metav1.Time {
	if t := iw.Status.ObservedGenerationTime; t != nil && iw.Status.ObservedGeneration == iw.Generation {
		return *t
	}
	return metav1.NewTime(now.Truncate(time.Second))
}

// silentSince is when a node without a report on the current generation
// began to be silent: not before the generation existed for the
// controller, nor before the node did.
func silentSince(seen metav1.Time, node *metav1.PartialObjectMetadata) metav1.Time {
	if node.CreationTimestamp.After(seen.Time) {
		return node.CreationTimestamp
	}
	return seen
}

// minReadyNodes is how many of the counted nodes must have every image for
// Ready: spec.readiness.minReadyNodes scaled to them (percentages rounded
// up), all of them when unset.
func minReadyNodes(iw *warmv1.ImageWarm, counted int32) int32 {
	r := iw.Spec.Readiness
	if r == nil || r.MinReadyNodes == nil {
		return counted
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(r.MinReadyNodes, int(counted), true)
	if err != nil || v < 0 {
		return counted // the API's validation rules this out
	}
	return int32(v)
}

// setReady sets Ready: True when at least minReadyNodes of the counted
// nodes (the matching ones whose platform no image lacks) have every
// image. The False reasons go from what the user chose (suspend, the
// selector, the threshold) to what needs attention (failures, silent
// agents) to plain progress.
func setReady(st *warmv1.ImageWarmStatus, iw *warmv1.ImageWarm) {
	n := st.Nodes
	counted := n.Matching - n.Unsupported
	need := minReadyNodes(iw, counted)
	c := metav1.Condition{Type: warmv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: iw.Generation}
	switch {
	case counted > 0 && n.Ready >= need:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonAllNodesWarm
		if n.Ready < counted {
			c.Reason = warmv1.ReasonMinReadyNodesMet
		}
		c.Message = fmt.Sprintf("%d/%d matching nodes have every image", n.Ready, counted) + needText(iw, need)
	case iw.Spec.Suspend:
		c.Reason = warmv1.ReasonSuspended
		c.Message = fmt.Sprintf("suspended; %d/%d matching nodes have every image", n.Ready, counted)
	case n.Matching == 0:
		c.Reason, c.Message = warmv1.ReasonNoMatchingNodes, "the nodeSelector matches no node"
	case counted == 0:
		c.Reason = warmv1.ReasonNoSupportedNodes
		c.Message = fmt.Sprintf("every matching node (%d) lacks the platform of some image", n.Matching)
	case need > counted:
		c.Reason = warmv1.ReasonTooFewNodes
		c.Message = fmt.Sprintf("minReadyNodes asks for %d nodes; only %d matching nodes can hold the images", need, counted)
	case n.Failed > 0:
		c.Reason = warmv1.ReasonNodesFailed
		c.Message = fmt.Sprintf("%d/%d matching nodes failed to pull an image", n.Failed, counted) + needText(iw, need)
	case n.NotReporting > 0:
		c.Reason = warmv1.ReasonNotReporting
		c.Message = notReportingText(st, iw) + needText(iw, need)
	case n.Unlisted > 0:
		c.Reason = warmv1.ReasonImagesNotListed
		c.Message = fmt.Sprintf("%d/%d matching nodes have every image; %d pulling; %d want more images or ImageWarms than a NodeWarm lists (%d each) and left some of this ImageWarm's images out of their report",
			n.Ready, counted, n.Pulling, n.Unlisted, warmv1.MaxNodeImages) + needText(iw, need)
	default:
		c.Reason = warmv1.ReasonPulling
		c.Message = fmt.Sprintf("%d/%d matching nodes have every image; %d pulling", n.Ready, counted, n.Pulling) + needText(iw, need)
	}
	c.Message += apartText(st, c.Reason)
	meta.SetStatusCondition(&st.Conditions, c)
}

// needText says what minReadyNodes asks for, when it is set.
func needText(iw *warmv1.ImageWarm, need int32) string {
	if r := iw.Spec.Readiness; r != nil && r.MinReadyNodes != nil {
		return fmt.Sprintf(" (minReadyNodes %s: %d needed)", r.MinReadyNodes.String(), need)
	}
	return ""
}

// apartText names the nodes not counted, and the silent ones when the
// Ready reason does not already.
func apartText(st *warmv1.ImageWarmStatus, reason string) string {
	var parts []string
	if u := st.Nodes.Unsupported; u > 0 {
		parts = append(parts, fmt.Sprintf("%d cannot hold an image (they lack its platform, or their runtime cannot mount an artifact) and are not counted", u))
	}
	if st.Nodes.NotReporting > 0 && reason != warmv1.ReasonNotReporting {
		parts = append(parts, fmt.Sprintf("%d not reporting: %s", st.Nodes.NotReporting, silentNames(st)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// notReportingText counts the silent nodes and names the first few.
func notReportingText(st *warmv1.ImageWarmStatus, iw *warmv1.ImageWarm) string {
	return fmt.Sprintf("%d/%d matching nodes have not reported on generation %d, or their agent is down: %s",
		st.Nodes.NotReporting, st.Nodes.Matching, iw.Generation, silentNames(st))
}

// silentNames names the first namedSilentNodes silent nodes, and how many
// more there are. Names are at most 253 characters, so the message stays
// well within a condition's bound.
func silentNames(st *warmv1.ImageWarmStatus) string {
	names := make([]string, 0, namedSilentNodes)
	for i := 0; i < len(st.SilentNodes) && i < namedSilentNodes; i++ {
		names = append(names, st.SilentNodes[i].Node)
	}
	out := strings.Join(names, ", ")
	if more := int(st.Nodes.NotReporting) - len(names); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}
