package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// scheme knows the built-in types and warmer's.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(warmv1.AddToScheme(s))
	return s
}

// agentScheme knows only what the agent reads and writes: Nodes, Secrets
// and warmer's types (its events go through client-go's own scheme). A
// scheme of every built-in group is a few hundred KiB of maps on every
// node for types the agent never sees.
func agentScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(warmv1.AddToScheme(s))
	return s
}
