package plan

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// What each namespace gets of what the node shares: the report's
// ImageWarms and image entries, bounded by the API, are taken in turn by
// the namespaces that ask, so one namespace asking for many cannot push
// another's out; and the engine's pulls of one priority start in turn by
// namespace, so one namespace's many pulls cannot hold back another's
// few.

// shareOut gives each pull the namespace whose turn it takes in the
// engine's queue: of the namespaces whose ImageWarms want its entry, the
// one asking for the fewest pulls in this pass, the first by name among
// equals. An image several namespaces want then goes as early as the
// turns of the one that wants least bring it, rather than waiting among a
// namespace's many: that one pays a turn for it, and the others, which
// would have pulled it anyway, wait no longer for it than it does.
func shareOut(pulls []Pull) {
	asks := map[string]int{}
	for i := range pulls {
		for _, ns := range pulls[i].namespaces {
			asks[ns]++
		}
	}
	for i := range pulls {
		pl := &pulls[i]
		for j, ns := range pl.namespaces { // sorted: equals go by name
			if j == 0 || asks[ns] < asks[pl.Share] {
				pl.Share = ns
			}
		}
	}
}

// namespaces are those of the ImageWarms that want w, in order.
func (w *wantedImage) namespaces() []string {
	var out []string
	for _, nn := range w.warms { // sorted: a namespace's are together
		if len(out) == 0 || out[len(out)-1] != nn.Namespace {
			out = append(out, nn.Namespace)
		}
	}
	return out
}

// fairWarms keeps max of the ImageWarms (sorted by namespace, then name),
// taken in turn by their namespaces, each its next by name. The kept ones
// keep their order: status.warms, which images point into by index, is
// the same list from one pass to the next while the ImageWarms are.
func fairWarms(warms []warmv1.WarmRef, max int) []warmv1.WarmRef {
	if len(warms) <= max {
		return warms
	}
	return takeInTurn(warms, max, func(w *warmv1.WarmRef) []string { return []string{w.Namespace} })
}

// fairShare keeps max of the report's entries, taken in turn by the
// namespaces that want them (nsOf), each its next entry by name: one
// namespace asking for many images cannot push another's out of the
// report. An entry several namespaces want counts for each. The entries
// keep their order.
func fairShare(images []warmv1.NodeImage, max int, nsOf func(*warmv1.NodeImage) []string) []warmv1.NodeImage {
	return takeInTurn(images, max, nsOf)
}

// takeInTurn keeps max of items, in their order, taken in turn by the
// namespaces nsOf names for each (inTurn).
func takeInTurn[T any](items []T, max int, nsOf func(*T) []string) []T {
	queues := map[string][]int{}
	for i := range items {
		for _, ns := range nsOf(&items[i]) {
			queues[ns] = append(queues[ns], i)
		}
	}
	keep := inTurn(queues, len(items), max)
	out := make([]T, 0, max)
	for i := range items {
		if keep[i] {
			out = append(out, items[i])
		}
	}
	return out
}

// inTurn picks at most max of n items, the namespaces of queues (by name)
// taking turns, each its next item not picked yet. It says which are
// picked.
func inTurn(queues map[string][]int, n, max int) []bool {
	names := make([]string, 0, len(queues))
	for ns := range queues {
		names = append(names, ns)
	}
	sort.Strings(names)
	keep := make([]bool, n)
	for kept, progressed := 0, true; kept < max && progressed; {
		progressed = false
		for _, ns := range names {
			q := queues[ns]
			for len(q) > 0 && keep[q[0]] {
				q = q[1:]
			}
			if len(q) > 0 && kept < max {
				keep[q[0]], kept, progressed = true, kept+1, true
				q = q[1:]
			}
			queues[ns] = q
		}
	}
	return keep
}

// entryNamespaces returns, for the report's entries, the namespaces each
// is wanted by: its secrets' namespace, or those of the ImageWarms that
// want it (all of them, listed in status.warms or not); for an entry not
// in the desired set (an invalid reference), those of the listed
// ImageWarms it points to.
func entryNamespaces(d Desired, warms []warmv1.WarmRef) func(*warmv1.NodeImage) []string {
	return func(img *warmv1.NodeImage) []string {
		if img.SecretsNamespace != "" {
			return []string{img.SecretsNamespace}
		}
		if w := d.images[entryKey(img.Image, "")]; w != nil {
			return w.namespaces()
		}
		var out []string
		for _, i := range img.Warms {
			if int(i) < len(warms) && !slices.Contains(out, warms[i].Namespace) {
				out = append(out, warms[i].Namespace)
			}
		}
		if len(out) == 0 {
			return []string{""}
		}
		return out
	}
}

// warmsCondition returns conds with WarmsListed set while more ImageWarms
// match the node than a NodeWarm lists, and without it otherwise. The
// controller counts an ImageWarm left out as unlisted on the node, not as
// not reporting.
func warmsCondition(conds []metav1.Condition, matching int, now metav1.Time) []metav1.Condition {
	return boundCondition(conds, matching > warmv1.MaxNodeWarms, metav1.Condition{Type: warmv1.ConditionWarmsListed, Status: metav1.ConditionFalse,
		Reason: warmv1.ReasonTooManyImageWarms, Message: fmt.Sprintf("%d ImageWarms match this node, more than the %d a NodeWarm lists: "+
			"%d are listed, shared in turn among their namespaces. The ImageWarms left out count this node as unlisted, "+
			"neither ready nor failed; the agent still warms their images. Have fewer ImageWarms select this node", matching, warmv1.MaxNodeWarms, warmv1.MaxNodeWarms)}, now)
}
