package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageState is where one wanted image stands on one node.
// +kubebuilder:validation:Enum=Present;Pulling;Queued;BackOff;Failed;Skipped
type ImageState string

const (
	// ImagePresent: the runtime has the image.
	ImagePresent ImageState = "Present"
	// ImagePulling: a pull is under way.
	ImagePulling ImageState = "Pulling"
	// ImageQueued: waiting for a pull slot, the throttle or the disk guard.
	ImageQueued ImageState = "Queued"
	// ImageBackOff: the last pull failed and the next waits out a back-off.
	ImageBackOff ImageState = "BackOff"
	// ImageFailed: the pull failed in a way retrying cannot fix without a
	// change (an invalid reference, for one).
	ImageFailed ImageState = "Failed"
	// ImageSkipped: wanted only by suspended ImageWarms.
	ImageSkipped ImageState = "Skipped"
)

// Bounds of a NodeWarm.
const (
	// MaxNodeImages is the most images one NodeWarm reports.
	MaxNodeImages = 4096
	// MaxRequestedBy is the most ImageWarms listed as wanting one image.
	MaxRequestedBy = 16
)

// RuntimeInfo names the node's container runtime.
type RuntimeInfo struct {
	// name of the runtime, e.g. containerd.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name,omitempty"`
	// version of the runtime.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
	// endpoint the agent talks CRI to.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Endpoint string `json:"endpoint,omitempty"`
}

// ImageFilesystem is the usage of the filesystem the runtime keeps images on.
type ImageFilesystem struct {
	// mountpoint the runtime reports for its image filesystem.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Mountpoint string `json:"mountpoint,omitempty"`
	// usedBytes is what the runtime's images take there.
	// +optional
	UsedBytes int64 `json:"usedBytes,omitempty"`
	// capacityBytes is the filesystem's size, when the agent can see it.
	// +optional
	CapacityBytes int64 `json:"capacityBytes,omitempty"`
	// usedPercent is how full the whole filesystem is, when known.
	// +optional
	UsedPercent int32 `json:"usedPercent,omitempty"`
}

// WarmRef names an ImageWarm that applies to the node and the generation of
// its spec the agent is acting on.
type WarmRef struct {
	// namespace of the ImageWarm.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the ImageWarm.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// generation of the ImageWarm's spec the agent acts on.
	// +required
	Generation int64 `json:"generation"`
}

// NodeImage is one wanted image's state on the node.
type NodeImage struct {
	// image is the normalised reference, e.g. docker.io/library/nginx:latest.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// state is Present, Pulling, Queued, BackOff, Failed or Skipped.
	// +required
	State ImageState `json:"state"`
	// imageID is the runtime's id of the image (its config digest).
	// +optional
	// +kubebuilder:validation:MaxLength=200
	ImageID string `json:"imageID,omitempty"`
	// digest is the repository digest the image was resolved to.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	Digest string `json:"digest,omitempty"`
	// sizeBytes is the image's size as the runtime reports it.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// reason classifies the last failure, e.g. Unauthorized or NotFound.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message explains the last failure, cut to 512 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// attempts counts pulls tried since the image was last present.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// lastTransitionTime is when state last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// requestedBy lists (as namespace/name) up to 16 ImageWarms that want
	// the image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	RequestedBy []string `json:"requestedBy,omitempty"`
}

// NodeWarmStatus is one node agent's report.
type NodeWarmStatus struct {
	// runtime is the node's container runtime.
	// +optional
	Runtime RuntimeInfo `json:"runtime,omitempty"`
	// imageFilesystem is the usage of the runtime's image filesystem.
	// +optional
	ImageFilesystem *ImageFilesystem `json:"imageFilesystem,omitempty"`
	// conditions describe the agent: RuntimeReady and DiskPressure.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// warms are the ImageWarms that apply to this node, with the generation
	// the agent acts on.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Warms []WarmRef `json:"warms,omitempty"`
	// images is every wanted image's state, sorted by image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	Images []NodeImage `json:"images,omitempty"`
	// desired is the number of distinct images wanted on this node.
	// +optional
	Desired int32 `json:"desired"`
	// present is the number of wanted images the runtime has.
	// +optional
	Present int32 `json:"present"`
	// pulling is the number of wanted images being pulled or queued.
	// +optional
	Pulling int32 `json:"pulling"`
	// failed is the number of wanted images whose last pull failed.
	// +optional
	Failed int32 `json:"failed"`
}

// NodeWarm is one node agent's report of the images it keeps. Its name is the
// node's name and the Node owns it, so it goes when the node goes. Only the
// node's agent writes it; the controller reads every NodeWarm to sum up each
// ImageWarm.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nw,categories=warmer
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`,description="Distinct images wanted on the node"
// +kubebuilder:printcolumn:name="Present",type=integer,JSONPath=`.status.present`,description="Wanted images the runtime has"
// +kubebuilder:printcolumn:name="Pulling",type=integer,JSONPath=`.status.pulling`,description="Wanted images being pulled or queued"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`,description="Wanted images whose last pull failed"
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.status.runtime.version`,priority=1,description="Container runtime version"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeWarm struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the agent's report.
	// +optional
	Status NodeWarmStatus `json:"status,omitempty"`
}

// NodeWarmList is a list of NodeWarms.
//
// +kubebuilder:object:root=true
type NodeWarmList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeWarm `json:"items"`
}
