package warmerctl

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// FailureGroup is every failing image of one reason, over the nodes.
type FailureGroup struct {
	Reason string `json:"reason"`
	// Nodes are the failing nodes, by name.
	Nodes []string `json:"nodes"`
	// Images are the failing images, by reference.
	Images []string `json:"images"`
	// Message is the first failing node's message.
	Message string `json:"message,omitempty"`
	// Attempts is the most pulls a node tried since the image was present.
	Attempts int32 `json:"attempts,omitempty"`
	// Since is the earliest time a failing image changed state.
	Since *metav1.Time `json:"since,omitempty"`
	// BackingOff is true when some node will try again on its own.
	BackingOff bool `json:"backingOff,omitempty"`
	// NextTry is the earliest time a node said it tries again (as last
	// written: a node refreshes it at most every minute or so while its
	// pulls keep failing alike, so it may have passed).
	NextTry *metav1.Time `json:"nextTry,omitempty"`
}

func addFailure(groups map[string]*FailureGroup, node string, img *warmv1.NodeImage) {
	reason := cmp.Or(img.Reason, warmv1.ReasonErrImagePull)
	g := groups[reason]
	if g == nil {
		g = &FailureGroup{Reason: reason}
		groups[reason] = g
	}
	if len(g.Nodes) == 0 || g.Nodes[len(g.Nodes)-1] != node {
		g.Nodes = append(g.Nodes, node)
	}
	if !slices.Contains(g.Images, img.Image) {
		g.Images = append(g.Images, img.Image)
	}
	if g.Message == "" {
		g.Message = img.Message
	}
	g.Attempts = max(g.Attempts, img.Attempts)
	if t := img.LastTransitionTime; t != nil && (g.Since == nil || t.Before(g.Since)) {
		g.Since = t
	}
	g.BackingOff = g.BackingOff || img.State == warmv1.ImageBackOff
	if t := img.RetryAt; t != nil && img.State == warmv1.ImageBackOff && (g.NextTry == nil || t.Before(g.NextTry)) {
		g.NextTry = t
	}
}

// nextTry says when the group's first node tries again, for text.
func (g FailureGroup) nextTry() string {
	if g.NextTry == nil {
		return ""
	}
	return "next try " + g.NextTry.UTC().Format(time.RFC3339)
}

// sortedGroups orders the groups by how many nodes they hold, then by
// reason, each with its nodes and images sorted.
func sortedGroups(groups map[string]*FailureGroup) []FailureGroup {
	out := make([]FailureGroup, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g.Nodes)
		g.Nodes = slices.Compact(g.Nodes)
		slices.Sort(g.Images)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b FailureGroup) int {
		if c := cmp.Compare(len(b.Nodes), len(a.Nodes)); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	return out
}
