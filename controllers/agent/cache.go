package agent

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// CacheOptions are the cache settings of the agent's manager for the
// named node: one agent runs on every node, so what it caches is paid for
// N times over. Of Nodes and NodeWarms only its own are watched (every
// ImageWarm and RolloutBound is: the agent decides from them what its node
// wants), and each cached object keeps only what the agent reads (the
// transforms below; a RolloutBound is small and loses its managed fields).
func CacheOptions(nodeName string) cache.Options {
	own := fields.OneTermEqualSelector("metadata.name", nodeName)
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:      {Field: own, Transform: stripNode},
			&warmv1.NodeWarm{}:  {Field: own, Transform: stripNodeWarm},
			&warmv1.ImageWarm{}: {Transform: stripImageWarm},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// The transforms below drop, before an object enters the cache, what the
// agent never reads of it: managed fields everywhere (often the larger
// part of an object); of an ImageWarm, which every agent caches every one
// of, all but its spec's wishes (spec.readiness is the controller's, and
// of spec.imagesFrom only its presence counts: the images are in
// status.resolved), its resolved images and its rollout's bound (the
// rest of the status is the controller's fleet summary, up to several
// KiB), and its labels, annotations (kubectl apply's last-applied copy of
// the spec), owner references and finalizers, which no agent reads and a
// user may make large; a Node's status (its image list, conditions,
// addresses: many KiB on a busy node) but the agent's own ImagesWarm
// condition, and its annotations, and the status of
// the agent's own NodeWarm, which the agent writes and keeps itself
// (reportState) and only watches for its deletion. Event handlers see the
// same stripped objects; the agent's predicates look only at the Node's
// labels and the ImageWarm's generation, resolved images and rollout.
// Anything else (a tombstone) passes unchanged. TestStripImageWarm holds
// what is kept to what the planner reads.
var (
	_ toolscache.TransformFunc = stripImageWarm
	_ toolscache.TransformFunc = stripNode
	_ toolscache.TransformFunc = stripNodeWarm
)

func stripImageWarm(in any) (any, error) {
	if iw, ok := in.(*warmv1.ImageWarm); ok {
		iw.ManagedFields, iw.Annotations, iw.Labels = nil, nil, nil
		iw.OwnerReferences, iw.Finalizers = nil, nil
		iw.Spec.Readiness = nil
		if iw.Spec.ImagesFrom != nil {
			// Present, so that status.resolved counts (ResolvedImages).
			iw.Spec.ImagesFrom = &warmv1.ImagesFrom{}
		}
		iw.Status = warmv1.ImageWarmStatus{Resolved: iw.Status.Resolved, Rollout: iw.Status.Rollout}
	}
	return in, nil
}

func stripNode(in any) (any, error) {
	if n, ok := in.(*corev1.Node); ok {
		n.ManagedFields, n.Annotations = nil, nil
		n.Status = corev1.NodeStatus{Conditions: ownConditions(n.Status.Conditions)}
	}
	return in, nil
}

// ownConditions keeps the one Node condition the agent writes, which it
// compares with what it would write (nodesignal_patch.go).
func ownConditions(cs []corev1.NodeCondition) []corev1.NodeCondition {
	for _, c := range cs {
		if c.Type == warmv1.ConditionImagesWarm {
			return []corev1.NodeCondition{c}
		}
	}
	return nil
}

func stripNodeWarm(in any) (any, error) {
	if nw, ok := in.(*warmv1.NodeWarm); ok {
		nw.ManagedFields = nil
		nw.Status = warmv1.NodeWarmStatus{}
	}
	return in, nil
}

// ClientOptions are the client settings of the agent's manager. Secrets
// are read with GET only, never cached: the agent may not list or watch
// them.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		DisableFor: []client.Object{&corev1.Secret{}},
	}}
}
