package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NodeSelector selects objects (nodes, or workloads as LabelSelector) by
// their labels. It is written exactly like a metav1.LabelSelector
// (matchLabels, matchExpressions); it is a type of its own only so that
// every list and string in it is bounded and checked by the API server,
// which a metav1.LabelSelector field in a CRD is not.
//
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="matchLabels keys must be valid label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
type NodeSelector struct {
	// matchLabels selects the objects that carry every one of these labels
	// with exactly these values.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// matchExpressions selects the objects that satisfy every one of these
	// requirements.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelector selects workloads by their labels, the same way
// NodeSelector selects nodes.
type LabelSelector = NodeSelector

// LabelValue is the value of a label: at most 63 alphanumerics, '-',
// '_' or '.', starting and ending alphanumeric, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="size(self) > 63 || self.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')",message="a label value is empty or up to 63 letters, digits, -, _ and ., starting and ending with a letter or digit"
type LabelValue string

// NodeSelectorRequirement is one label requirement: a key, an operator and,
// for In and NotIn, the values.
//
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="values must be non-empty for In and NotIn, and absent for Exists and DoesNotExist"
type NodeSelectorRequirement struct {
	// key is the label key the requirement applies to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!self.matches('/.*/')",message="a label key has at most one /, between its prefix and its name, such as example.com/zone"
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.matches('/.*/') || self.matches('^([^/]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="the name of a label key, after the / if it has a prefix, is 1 to 63 letters, digits, -, _ and ., starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.matches('/.*/') || self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[^/]*$')",message="the prefix of a label key, before the /, is a DNS subdomain of lower-case letters, digits, - and ., such as example.com"
	Key string `json:"key"`

	// operator relates the key to the values: In, NotIn, Exists or
	// DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="size(self) > 63 || self.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')",message="a label value is empty or up to 63 letters, digits, -, _ and ., starting and ending with a letter or digit"
	Values []string `json:"values,omitempty"`
}

// AsSelector turns the selector into a labels.Selector. A nil selector, like
// an empty one, selects every object.
func (s *NodeSelector) AsSelector() (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	ls := &metav1.LabelSelector{MatchLabels: make(map[string]string, len(s.MatchLabels))}
	for k, v := range s.MatchLabels {
		ls.MatchLabels[k] = string(v)
	}
	for _, r := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: r.Operator, Values: r.Values,
		})
	}
	return metav1.LabelSelectorAsSelector(ls)
}
