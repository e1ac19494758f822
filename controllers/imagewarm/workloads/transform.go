package workloads

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transform strips a workload down to what imagesFrom reads before the
// controller's cache stores it: name, namespace, labels and the images of
// its pod template (containers and init containers by name and image,
// image volumes by name and reference). A full Deployment often takes tens
// of kilobytes (managed fields, annotations, the whole template, status);
// the stripped one a few hundred bytes, so caching every workload of a
// large cluster costs little. The watch still carries whole objects; only
// what is kept shrinks. Any other object (a tombstone, for one) passes
// unchanged.
func Transform(obj any) (any, error) {
	src, kind, ok := podSpec(obj)
	if !ok {
		return obj, nil
	}
	in, out := obj.(metav1.Object), NewObject(kind)
	dst, _, _ := podSpec(out)
	*dst = stripPodSpec(src)
	out.SetNamespace(in.GetNamespace())
	out.SetName(in.GetName())
	out.SetUID(in.GetUID())
	out.SetResourceVersion(in.GetResourceVersion())
	out.SetGeneration(in.GetGeneration())
	out.SetLabels(in.GetLabels())
	out.SetDeletionTimestamp(in.GetDeletionTimestamp())
	return out, nil
}

// stripPodSpec keeps the images of a pod spec and the names that say
// where each is.
func stripPodSpec(s *corev1.PodSpec) corev1.PodSpec {
	var out corev1.PodSpec
	for _, c := range s.InitContainers {
		out.InitContainers = append(out.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range s.Containers {
		out.Containers = append(out.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, v := range s.Volumes {
		if v.Image != nil {
			out.Volumes = append(out.Volumes, corev1.Volume{Name: v.Name,
				VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: v.Image.Reference}}})
		}
	}
	return out
}
