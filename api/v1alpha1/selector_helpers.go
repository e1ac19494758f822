package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ControlPlaneRoles are the node labels that mark a control-plane node.
// The levers policy (config/policy/imagewarm_levers_policy.yaml) names
// the same two.
var ControlPlaneRoles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// AsNodeSelector is AsSelector for nodes: a node carrying a control-plane
// role label is selected only when the selector names a control-plane
// role (in matchLabels, or an In or Exists expression), as the levers
// policy lets only marked namespaces do. An ImageWarm with no selector, or one about
// other labels, keeps off control-plane nodes, which the agent's
// DaemonSet tolerates. The agent's desired set and the controller's
// count of matching nodes both select through it, so they agree on
// which nodes an ImageWarm reaches.
func (s *NodeSelector) AsNodeSelector() (labels.Selector, error) {
	sel, err := s.AsSelector()
	if err != nil {
		return nil, err
	}
	if s.NamesControlPlane() {
		return sel, nil
	}
	for _, role := range ControlPlaneRoles {
		r, err := labels.NewRequirement(role, selection.DoesNotExist, nil)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}

// NamesControlPlane says whether the selector asks for control-plane
// nodes: it names a control-plane role in matchLabels, or in an In or
// Exists expression, the way the levers policy reads it.
func (s *NodeSelector) NamesControlPlane() bool {
	if s == nil {
		return false
	}
	for k := range s.MatchLabels {
		if slices.Contains(ControlPlaneRoles, k) {
			return true
		}
	}
	for _, r := range s.MatchExpressions {
		if slices.Contains(ControlPlaneRoles, r.Key) && (r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpExists) {
			return true
		}
	}
	return false
}
