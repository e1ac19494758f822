package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// scheme knows the built-in types and warmer's.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := warmv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
