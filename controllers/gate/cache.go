package gate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// PodCacheConfig is the cache entry of the opted-in Pods of every
// namespace: those with the warmer.dev/warm-gate label alone, and of each
// only what the gate reads (TrimPod).
func PodCacheConfig() cache.Config {
	req, err := labels.NewRequirement(LabelImageWarm, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key
	}
	return cache.Config{LabelSelector: labels.NewSelector().Add(*req), Transform: TrimPod}
}

// TrimPod keeps of a Pod what the gate reads: the scheduling constraints,
// images and gates. Status writes are patches, so nothing trimmed is
// written back.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		Labels: map[string]string{LabelImageWarm: pod.Labels[LabelImageWarm]}}}
	if d, ok := pod.Annotations[AnnotationDeadline]; ok {
		out.Annotations = map[string]string{AnnotationDeadline: d}
	}
	out.Spec = corev1.PodSpec{NodeSelector: pod.Spec.NodeSelector, Affinity: pod.Spec.Affinity,
		Tolerations: pod.Spec.Tolerations, SchedulingGates: pod.Spec.SchedulingGates,
		InitContainers: imagesOnly(pod.Spec.InitContainers), Containers: imagesOnly(pod.Spec.Containers)}
	return out, nil
}

func imagesOnly(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	return out
}

// NodeCache is the cache entry of Nodes: labels, taints and
// schedulability, without the status (its image list is large).
func NodeCache() cache.ByObject {
	return cache.ByObject{Transform: func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Node); ok {
			n.Status = corev1.NodeStatus{}
			n.ManagedFields, n.Annotations = nil, nil
		}
		return obj, nil
	}}
}
