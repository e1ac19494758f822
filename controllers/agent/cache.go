package agent

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// CacheOptions are the cache settings of the agent's manager for the
// named node: one agent runs on every node, so what it caches is paid for
// N times over. Only its own Node and NodeWarm are watched, and managed
// fields (often the larger part of an object) are dropped from everything
// cached.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:     {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&warmv1.NodeWarm{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// ClientOptions are the client settings of the agent's manager. Secrets
// are read with GET only, never cached: the agent may not list or watch
// them.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		DisableFor: []client.Object{&corev1.Secret{}},
	}}
}
