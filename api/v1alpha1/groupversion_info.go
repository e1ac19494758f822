// Package v1alpha1 holds the warmer.dev/v1alpha1 API: ImageWarm, which says
// which images must be present on which nodes, and NodeWarm, which each node's
// agent writes to report what it has, and RolloutBound, which carries an
// ImageWarm's rollout bound to the agents.
//
// +kubebuilder:object:generate=true
// +groupName=warmer.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "warmer.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	// It is apimachinery's, so that importing the API pulls in nothing of
	// controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ImageWarm{}, &ImageWarmList{}, &NodeWarm{}, &NodeWarmList{}, &RolloutBound{}, &RolloutBoundList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
