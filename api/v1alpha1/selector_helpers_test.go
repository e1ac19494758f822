package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestAsNodeSelectorControlPlane holds the rule both the agent and the
// controller select nodes by: control-plane nodes only for a selector
// that names their role.
func TestAsNodeSelectorControlPlane(t *testing.T) {
	worker := map[string]string{"kubernetes.io/os": "linux"}
	cp := map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}
	master := map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/master": ""}
	both := map[string]string{"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": ""}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *NodeSelector {
		return &NodeSelector{MatchExpressions: []NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		name string
		sel  *NodeSelector
		node map[string]string
		want bool
	}{
		{"no selector, worker", nil, worker, true},
		{"no selector, control-plane", nil, cp, false},
		{"no selector, master", nil, master, false},
		{"empty selector, control-plane", &NodeSelector{}, cp, false},
		{"other labels, control-plane", &NodeSelector{MatchLabels: map[string]LabelValue{"kubernetes.io/os": "linux"}}, cp, false},
		{"other labels, worker", &NodeSelector{MatchLabels: map[string]LabelValue{"kubernetes.io/os": "linux"}}, worker, true},
		{"matchLabels names it", &NodeSelector{MatchLabels: map[string]LabelValue{"node-role.kubernetes.io/control-plane": ""}}, cp, true},
		{"Exists names it", expr("node-role.kubernetes.io/control-plane", metav1.LabelSelectorOpExists), cp, true},
		{"In names it", expr("node-role.kubernetes.io/master", metav1.LabelSelectorOpIn, ""), master, true},
		{"naming master reaches a node with both", expr("node-role.kubernetes.io/master", metav1.LabelSelectorOpExists), both, true},
		{"NotIn does not name it", expr("node-role.kubernetes.io/control-plane", metav1.LabelSelectorOpNotIn, "x"), cp, false},
		{"DoesNotExist keeps workers", expr("node-role.kubernetes.io/control-plane", metav1.LabelSelectorOpDoesNotExist), worker, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := tc.sel.AsNodeSelector()
			if err != nil {
				t.Fatal(err)
			}
			if got := sel.Matches(labels.Set(tc.node)); got != tc.want {
				t.Errorf("selector %v matches %v: %v, want %v", sel, tc.node, got, tc.want)
			}
		})
	}
}
