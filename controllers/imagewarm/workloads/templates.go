package workloads

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// NewObject returns an empty object of kind, to watch or to read into.
func NewObject(kind warmv1.WorkloadKind) client.Object {
	switch kind {
	case warmv1.KindDeployment:
		return &appsv1.Deployment{}
	case warmv1.KindStatefulSet:
		return &appsv1.StatefulSet{}
	case warmv1.KindDaemonSet:
		return &appsv1.DaemonSet{}
	case warmv1.KindJob:
		return &batchv1.Job{}
	case warmv1.KindCronJob:
		return &batchv1.CronJob{}
	}
	return nil
}

// NewList returns an empty list of kind.
func NewList(kind warmv1.WorkloadKind) client.ObjectList {
	switch kind {
	case warmv1.KindDeployment:
		return &appsv1.DeploymentList{}
	case warmv1.KindStatefulSet:
		return &appsv1.StatefulSetList{}
	case warmv1.KindDaemonSet:
		return &appsv1.DaemonSetList{}
	case warmv1.KindJob:
		return &batchv1.JobList{}
	case warmv1.KindCronJob:
		return &batchv1.CronJobList{}
	}
	return nil
}

// podSpec returns the pod template's spec of a workload, its kind, and
// false for any other object.
func podSpec(obj any) (*corev1.PodSpec, warmv1.WorkloadKind, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec, warmv1.KindDeployment, true
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec, warmv1.KindStatefulSet, true
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec, warmv1.KindDaemonSet, true
	case *batchv1.Job:
		return &o.Spec.Template.Spec, warmv1.KindJob, true
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.Spec, warmv1.KindCronJob, true
	}
	return nil, "", false
}

// TemplateImage is one image a pod template names, and where.
type TemplateImage struct {
	// Image is the reference as written in the template.
	Image string
	// Where names the container or volume, e.g. "initContainers[sidecar]".
	Where string
}

// Images lists the images a workload's pod template names: its init
// containers' (sidecars included), its containers' and its image
// volumes', in that order, as written. Empty images (a template may leave
// them to a later mutation) are skipped. Ephemeral containers are added to
// running Pods, never to templates, so there are none to read. It returns
// nil for an object that is not a workload.
func Images(obj any) []TemplateImage {
	spec, _, ok := podSpec(obj)
	if !ok {
		return nil
	}
	var out []TemplateImage
	add := func(image, where string) {
		if image != "" {
			out = append(out, TemplateImage{Image: image, Where: where})
		}
	}
	for i := range spec.InitContainers {
		add(spec.InitContainers[i].Image, "initContainers["+spec.InitContainers[i].Name+"]")
	}
	for i := range spec.Containers {
		add(spec.Containers[i].Image, "containers["+spec.Containers[i].Name+"]")
	}
	for i := range spec.Volumes {
		if v := spec.Volumes[i].Image; v != nil {
			add(v.Reference, "volumes["+spec.Volumes[i].Name+"]")
		}
	}
	return out
}

// KindOf is the workload kind of obj, "" for any other object.
func KindOf(obj any) warmv1.WorkloadKind {
	_, kind, _ := podSpec(obj)
	return kind
}
