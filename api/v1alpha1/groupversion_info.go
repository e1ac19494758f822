// Package v1alpha1 holds the warmer.dev/v1alpha1 API: ImageWarm, which says
// which images must be present on which nodes, and NodeWarm, which each node's
// agent writes to report what it has.
//
// +kubebuilder:object:generate=true
// +groupName=warmer.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "warmer.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
