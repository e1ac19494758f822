package v1alpha1

// WorkloadKind names a kind of workload whose pod template imagesFrom reads.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;Job;CronJob
type WorkloadKind string

// The workload kinds imagesFrom reads.
const (
	KindDeployment  WorkloadKind = "Deployment"
	KindStatefulSet WorkloadKind = "StatefulSet"
	KindDaemonSet   WorkloadKind = "DaemonSet"
	KindJob         WorkloadKind = "Job"
	KindCronJob     WorkloadKind = "CronJob"
)

// WorkloadKinds are every kind imagesFrom reads, in the order the
// controller reads them.
var WorkloadKinds = []WorkloadKind{KindDeployment, KindStatefulSet, KindDaemonSet, KindJob, KindCronJob}

// ImagesFrom takes images from the pod templates of the workloads in the
// ImageWarm's namespace that a label selector picks: the images of their
// containers, init containers (sidecars included) and image volumes.
// Ephemeral containers are never in a template and are not read.
type ImagesFrom struct {
	// workloadSelector selects workloads of this ImageWarm's namespace by
	// their labels (the workload's own labels, not its pod template's).
	// An empty selector ({}) selects every workload of the kinds.
	// +required
	WorkloadSelector LabelSelector `json:"workloadSelector"`

	// kinds limits the workloads read to these kinds: Deployment,
	// StatefulSet, DaemonSet, Job, CronJob. Absent means all five.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	Kinds []WorkloadKind `json:"kinds,omitempty"`
}

// ResolvedImages is the controller's resolution of spec.imagesFrom: the
// images agents warm beside spec.images, and a hash of them that agents
// echo in their NodeWarm, so that a node's report counts for this set only.
type ResolvedImages struct {
	// images are the distinct images the selected workloads' templates
	// name and spec.images does not, normalised as nodes report them
	// (docker.io/library/nginx:latest), sorted. At most 100 images in all
	// with spec.images; the rest are counted in dropped.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=544
	Images []string `json:"images,omitempty"`

	// hash identifies images. Agents echo it (NodeWarm
	// status.warms[].resolved) with the generation they act on.
	// +required
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[a-f0-9]*$`
	Hash string `json:"hash"`

	// workloads is the number of workloads the selector picked.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`

	// dropped is the number of distinct images left out because the
	// ImageWarm would otherwise warm more than 100.
	// +optional
	Dropped int32 `json:"dropped,omitempty"`

	// invalid is the number of template images that are not valid
	// references; the ImagesResolved condition names the first.
	// +optional
	Invalid int32 `json:"invalid,omitempty"`
}

// ResolvedImages are the images the controller resolved for
// spec.imagesFrom; none without imagesFrom (a status left from before it
// was removed is ignored).
func (iw *ImageWarm) ResolvedImages() []string {
	if iw.Spec.ImagesFrom == nil || iw.Status.Resolved == nil {
		return nil
	}
	return iw.Status.Resolved.Images
}

// ResolvedHash is the hash of ResolvedImages, which a node's report
// echoes to say which resolved images it covers: "" without imagesFrom.
func (iw *ImageWarm) ResolvedHash() string {
	if iw.Spec.ImagesFrom == nil || iw.Status.Resolved == nil {
		return ""
	}
	return iw.Status.Resolved.Hash
}
