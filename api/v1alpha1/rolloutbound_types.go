package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutBoundSpec is one ImageWarm's rollout bound as the controller last
// raised it.
type RolloutBoundSpec struct {
	// imageWarmUID is the UID of the ImageWarm this bound is for: a bound
	// left by a deleted ImageWarm of the same name admits no node of a new
	// one.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ImageWarmUID string `json:"imageWarmUID"`
	// generation is the ImageWarm's spec generation this bound is for.
	// +required
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`
	// resolved is the hash of the ImageWarm's resolved images this bound is
	// for; "" without imagesFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[a-f0-9]*$`
	Resolved string `json:"resolved,omitempty"`
	// admittedBelow admits every matching node whose rollout place is below
	// it, as status.rollout.admittedBelow of the ImageWarm does.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967296
	AdmittedBelow int64 `json:"admittedBelow"`
}

// RolloutBound carries an ImageWarm's rollout bound to the agents apart
// from the ImageWarm. The bound moves with every wave; written into the
// ImageWarm, each move would send the whole ImageWarm (its images, its
// fleet summary) to every agent, so the controller writes the ImageWarm's
// status at most every few seconds in a large fleet and waves would wait
// for it. This object holds the bound alone: the controller raises it
// within a moment of the report that frees a slot, and agents admit
// themselves by the higher of it and the ImageWarm's status.rollout. It
// lives in the ImageWarm's namespace under the same name, owned by it, and
// only the controller writes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=warmer
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.spec.generation`,description="ImageWarm generation the bound is for"
// +kubebuilder:printcolumn:name="AdmittedBelow",type=integer,JSONPath=`.spec.admittedBelow`,description="Nodes whose rollout place is below this are admitted"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RolloutBound struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the bound.
	// +required
	Spec RolloutBoundSpec `json:"spec"`
}

// RolloutBoundList is a list of RolloutBounds.
//
// +kubebuilder:object:root=true
type RolloutBoundList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RolloutBound `json:"items"`
}
