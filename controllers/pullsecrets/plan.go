package pullsecrets

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Plan is the pull secrets node's bundle holds, sorted: those named by
// each ImageWarm that selects the node by the agent's rule
// (NodeSelector.AsNodeSelector: a control-plane node only when the
// selector asks for one), is not suspended and is not being deleted. An
// ImageWarm whose selector does not parse selects nothing, as for the
// agent. A suspended ImageWarm pulls nothing, so its secrets stay out.
func Plan(nodeLabels map[string]string, warms []warmv1.ImageWarm) []types.NamespacedName {
	ls := labels.Set(nodeLabels)
	seen := map[types.NamespacedName]bool{}
	for i := range warms {
		iw := &warms[i]
		if iw.DeletionTimestamp != nil || iw.Spec.Suspend || len(iw.Spec.ImagePullSecrets) == 0 {
			continue
		}
		sel, err := iw.Spec.NodeSelector.AsNodeSelector()
		if err != nil || !sel.Matches(ls) {
			continue
		}
		for _, s := range iw.Spec.ImagePullSecrets {
			seen[types.NamespacedName{Namespace: iw.Namespace, Name: s.Name}] = true
		}
	}
	out := make([]types.NamespacedName, 0, len(seen))
	for nn := range seen {
		out = append(out, nn)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
