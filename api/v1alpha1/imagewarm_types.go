package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PullPolicy says when an agent pulls an image it is asked to keep.
// +kubebuilder:validation:Enum=IfNotPresent;Always
type PullPolicy string

const (
	// PullIfNotPresent pulls an image only when the node does not have it.
	PullIfNotPresent PullPolicy = "IfNotPresent"
	// PullAlways also pulls present images again every refreshInterval, so
	// that a tag moved in the registry is followed.
	PullAlways PullPolicy = "Always"
)

// Retention says whether the kubelet's image garbage collector may remove an
// ImageWarm's images.
// +kubebuilder:validation:Enum=Unpinned;Pinned
type Retention string

const (
	// RetentionUnpinned leaves the images to the kubelet's image garbage
	// collector, like any other image: the agent pulls them again when it
	// removes them.
	RetentionUnpinned Retention = "Unpinned"
	// RetentionPinned pins the images in the container runtime where it can
	// (containerd 1.7 and later), so the kubelet never collects them.
	RetentionPinned Retention = "Pinned"
)

// ImageWarmSpec says which images must be present on which nodes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.refreshInterval) || self.pullPolicy == 'Always'",message="refreshInterval is only allowed with pullPolicy Always"
// +kubebuilder:validation:XValidation:rule="has(self.images) || has(self.imagesFrom) || has(self.artifacts)",message="spec must list images or artifacts, or take images from workloads with imagesFrom"
// +kubebuilder:validation:XValidation:rule="!has(self.images) || !has(self.artifacts) || size(self.images) + size(self.artifacts) <= 100",message="images and artifacts together list at most 100 references"
type ImageWarmSpec struct {
	// images to keep present on every selected node, as a Pod's image field
	// takes them. A reference with neither tag nor digest means ":latest";
	// one with both a tag and a digest is pulled by its digest. Entries must
	// be unique. Required unless imagesFrom is set.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Images []ImageReference `json:"images,omitempty"`

	// artifacts are OCI artifacts (a manifest whose artifactType or config
	// is not an image's, such as model weights) that Pods mount as image
	// volumes, written as images are. They are warmed where the container
	// runtime can mount an artifact (CRI-O); elsewhere (containerd) the
	// agent pulls nothing and reports reason ArtifactsUnsupported, since a
	// Pod could not use what it fetched. An image volume of an ordinary
	// image belongs in images. Entries must be unique; a reference also in
	// images counts as an artifact.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Artifacts []ImageReference `json:"artifacts,omitempty"`

	// imagesFrom takes more images from the pod templates of workloads in
	// this ImageWarm's namespace, kept current as the templates change.
	// The controller resolves them into status.resolved; the agents warm
	// them as if they were listed in images.
	// +optional
	ImagesFrom *ImagesFrom `json:"imagesFrom,omitempty"`

	// nodeSelector selects the nodes that must hold the images, by their
	// labels, written like a Pod's label selector. Absent or empty selects
	// every node but the control-plane nodes (labelled
	// node-role.kubernetes.io/control-plane or .../master): only a
	// selector naming that role reaches those.
	// +optional
	NodeSelector *NodeSelector `json:"nodeSelector,omitempty"`

	// pullPolicy is IfNotPresent (pull only what is missing) or Always (also
	// pull present images again every refreshInterval, to follow moved tags).
	// +optional
	// +kubebuilder:default=IfNotPresent
	PullPolicy PullPolicy `json:"pullPolicy,omitempty"`

	// refreshInterval is how often present images are pulled again under
	// pullPolicy Always; the agent uses one hour when it is unset. At least
	// one minute. Only allowed with pullPolicy Always.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="refreshInterval is a duration: numbers each followed by a unit, h, m, s, ms, us or ns, such as 90s, 30m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1m')",message="refreshInterval must be at least 1m (and under 2562048h, the longest duration there is)"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// imagePullSecrets name Secrets in this ImageWarm's namespace (of type
	// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg) whose
	// credentials are tried, in order, for the images' registries. Secrets of
	// other namespaces cannot be used.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	ImagePullSecrets []SecretReference `json:"imagePullSecrets,omitempty"`

	// priority orders pulls on a node: images of higher-priority ImageWarms
	// are pulled first. Between -1000 and 1000; 0 by default.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// suspend stops new pulls for this ImageWarm and cancels queued ones.
	// Images already present are left alone.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// pullTimeout bounds one pull of one image; a pull that takes longer is
	// cancelled and reported with reason Timeout. Between 10s and 24h; the
	// agent's --pull-timeout applies when unset.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="pullTimeout is a duration: numbers each followed by a unit, h, m, s, ms, us or ns, such as 90s, 10m or 1h30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="pullTimeout must be between 10s and 24h"
	PullTimeout *metav1.Duration `json:"pullTimeout,omitempty"`

	// startupTaint, when true, makes a selected node that registered with the
	// agents' startup taint (warmer.dev/warming by default, the agent's
	// --startup-taint) keep it until every image of this ImageWarm is present
	// there, so no Pod is scheduled onto the node before its images are warm.
	// The agent removes the taint once every such ImageWarm is warm on its
	// node, or at the agent's --startup-taint-deadline after the node
	// registered, whichever comes first. A suspended ImageWarm holds no taint.
	// +optional
	StartupTaint bool `json:"startupTaint,omitempty"`

	// nodeLabel, when true, has each selected node carry the label
	// <namespace>.warm.warmer.dev/<name>: "true" while every image of this
	// ImageWarm is present there, and lose it as soon as one is not
	// (garbage-collected, evicted, or newly added to the list), so Pods can
	// prefer warm nodes with a node affinity. The key is this ImageWarm's
	// own: no other ImageWarm can set or clear it. A name longer than 63
	// characters is cut to 50 and ends in a hash of the whole. Writing
	// Nodes reaches past the namespace: only namespaces an operator marked
	// may set it (the warmer-imagewarm-cluster-levers admission policy).
	// +optional
	NodeLabel bool `json:"nodeLabel,omitempty"`

	// readiness says what Ready means: by default every matching node that
	// can hold the images must have them. Nodes whose platform an image
	// lacks never block Ready.
	// +optional
	Readiness *Readiness `json:"readiness,omitempty"`

	// retention is Unpinned (the kubelet's image garbage collector may
	// remove the images; the agent pulls them again) or Pinned (the agent
	// pins them in the container runtime, so the kubelet never collects
	// them, however full the disk). Pinning needs containerd 1.7 or later;
	// elsewhere the NodeWarm's Pinning condition says so and the images are
	// warmed unpinned. An image stays pinned while any Pinned ImageWarm
	// (suspended ones too) wants it on the node.
	// +optional
	// +kubebuilder:default=Unpinned
	Retention Retention `json:"retention,omitempty"`

	// rollout bounds how many nodes pull at once and can ask for a canary
	// node first. Absent, every matching node pulls at once.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// NodeCounts counts the nodes an ImageWarm selects, by how far they are.
type NodeCounts struct {
	// matching nodes are those the nodeSelector selects.
	// +optional
	Matching int32 `json:"matching"`
	// ready nodes have every image of the ImageWarm.
	// +optional
	Ready int32 `json:"ready"`
	// pulling nodes are still pulling or waiting to pull some image.
	// +optional
	Pulling int32 `json:"pulling"`
	// failed nodes failed to pull some image and are backing off.
	// +optional
	Failed int32 `json:"failed"`
	// notReporting nodes match but have no agent report for this
	// ImageWarm, or their agent is dead: its Pod has not been Ready for a
	// minute, whatever its last report said.
	// +optional
	NotReporting int32 `json:"notReporting"`
	// unsupported nodes lack the platform (OS and architecture) of some
	// image, or run a container runtime that cannot mount an artifact
	// (reason ArtifactsUnsupported): they can never hold it, so they do
	// not count toward Ready.
	// +optional
	Unsupported int32 `json:"unsupported,omitempty"`
	// unlisted nodes want more images, or match more ImageWarms, than a
	// NodeWarm lists (512 of each, shared fairly among the namespaces that
	// ask) and left some image of this ImageWarm, or the ImageWarm, out of
	// their report: its progress there cannot be seen. They are neither ready nor failed; their agents still warm it.
	// +optional
	Unlisted int32 `json:"unlisted,omitempty"`
}

// ImageFleetStatus is the progress across the matching nodes of one image
// that is not yet on all of them, or that they resolved to different
// digests.
type ImageFleetStatus struct {
	// image is the reference as written in spec.images.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// ready is the number of matching nodes that have the image.
	// +optional
	Ready int32 `json:"ready"`
	// pulling is the number of matching nodes pulling or about to pull it.
	// +optional
	Pulling int32 `json:"pulling"`
	// failed is the number of matching nodes that failed to pull it.
	// +optional
	Failed int32 `json:"failed"`
	// digestsDiffer is set when the nodes that have the image resolved it
	// to different digests (a tag moved between their pulls); each node's
	// NodeWarm has its digest.
	// +optional
	DigestsDiffer bool `json:"digestsDiffer,omitempty"`
	// unsupported is the number of matching nodes whose platform the image
	// lacks.
	// +optional
	Unsupported int32 `json:"unsupported,omitempty"`
	// unlisted is the number of matching nodes whose report left the image
	// out (see NodeCounts.unlisted).
	// +optional
	Unlisted int32 `json:"unlisted,omitempty"`
}

// NodeFailure is one node's failure to pull one image.
type NodeFailure struct {
	// node is the name of the node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// image is the reference as written in spec.images.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// reason is a stable, machine-readable class such as Unauthorized,
	// NotFound or RegistryUnavailable.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// message is the runtime's explanation, cut to 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// FleetPullProgress is how far the pulls of one ImageWarm's images have
// come over its nodes, in compressed bytes.
type FleetPullProgress struct {
	// nodes counts the nodes whose pulls are summed.
	// +required
	// +kubebuilder:validation:Minimum=0
	Nodes int32 `json:"nodes"`
	// bytesDone is how many of bytesTotal those nodes have.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999999999
	BytesDone int64 `json:"bytesDone"`
	// bytesTotal is the size of the images those nodes are pulling,
	// summed over the nodes.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999999999
	BytesTotal int64 `json:"bytesTotal"`
	// slowestNode is the node with the longest time left, or, where no
	// node has a rate to go by, the most bytes left.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SlowestNode string `json:"slowestNode,omitempty"`
	// slowestSecondsLeft is slowestNode's estimate of its time left.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999999
	SlowestSecondsLeft *int64 `json:"slowestSecondsLeft,omitempty"`
	// slowestPhase is what slowestNode's pulls of these images do:
	// Downloading while any downloads, else Unpacking; absent where its
	// agent reports no phase.
	// +optional
	// +kubebuilder:validation:Enum=Downloading;Unpacking
	SlowestPhase PullPhase `json:"slowestPhase,omitempty"`
}

// ImageWarmStatus is the fleet-wide summary the controller folds from the
// nodes' reports. Its size does not grow with the number of nodes, and it
// lists only what is not done (see limits.go for the budget).
type ImageWarmStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 1024)",message="condition messages must be at most 1024 characters"
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// imageCount is the number of images warmed: those the spec lists and,
	// with imagesFrom, those resolved from workloads.
	// +optional
	ImageCount int32 `json:"imageCount,omitempty"`

	// readyImages is the number of spec images every matching node has.
	// +optional
	ReadyImages int32 `json:"readyImages,omitempty"`

	// nodes counts the matching nodes by progress.
	// +optional
	Nodes NodeCounts `json:"nodes,omitempty"`

	// images is the progress of the first 20 images, in spec order, that
	// some matching node does not have yet or that the nodes resolved to
	// different digests. Images every node has are only counted, in
	// readyImages.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Images []ImageFleetStatus `json:"images,omitempty"`

	// failures lists the first few nodes that failed to pull an image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Failures []NodeFailure `json:"failures,omitempty"`

	// resolved is what spec.imagesFrom resolved to; absent without it.
	// +optional
	Resolved *ResolvedImages `json:"resolved,omitempty"`

	// silentNodes names the first 10 matching nodes, by name, whose agent
	// has not reported on observedGeneration, or is dead (its Pod not
	// Ready for a minute), with when their silence began (for a dead
	// agent, when its Pod stopped being Ready).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	SilentNodes []SilentNode `json:"silentNodes,omitempty"`

	// pullProgress sums the bytes of this ImageWarm's images being pulled
	// on the matching nodes whose agents see them (containerd), and names
	// the node expected to finish last. Absent while no such pull is under
	// way. Its size does not grow with the number of nodes.
	// +optional
	PullProgress *FleetPullProgress `json:"pullProgress,omitempty"`

	// servedStarts sums, over the matching nodes whose agents report on
	// this ImageWarm, the containers started in the last 24 hours from
	// one of its images after the node's agent had pulled that image:
	// starts that did not wait for a pull (containerd only). It moves at
	// a slow pace (the agents' and the controller's), not with each start.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999
	ServedStarts int64 `json:"servedStarts,omitempty"`

	// observedGenerationTime is when the controller first saw
	// observedGeneration: a node silent since then has not reported on it.
	// +optional
	ObservedGenerationTime *metav1.Time `json:"observedGenerationTime,omitempty"`

	// rollout is how far the current rollout may go; absent without
	// spec.rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// ImageWarm asks that a set of container images be kept present on the nodes
// its selector matches. An agent on each node pulls what is missing through
// the node's container runtime and reports back; the status sums up the fleet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=iw,categories=warmer
// +kubebuilder:printcolumn:name="Images",type=integer,JSONPath=`.status.imageCount`,description="Images warmed: listed in the spec and resolved from workloads"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes.matching`,description="Nodes the selector matches"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.nodes.ready`,description="Nodes that have every image"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.nodes.failed`,description="Nodes that failed to pull an image"
// +kubebuilder:printcolumn:name="Warm",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="The Ready condition"
// +kubebuilder:printcolumn:name="Pulling",type=integer,JSONPath=`.status.nodes.pulling`,priority=1,description="Nodes still pulling"
// +kubebuilder:printcolumn:name="Not-Reporting",type=integer,JSONPath=`.status.nodes.notReporting`,priority=1,description="Matching nodes without an agent report"
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.rollout.admitted`,priority=1,description="Nodes the rollout admitted"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Reason of the Ready condition"
// +kubebuilder:printcolumn:name="Served",type=integer,JSONPath=`.status.servedStarts`,priority=1,description="Containers started in the last day from its images after warmer pulled them"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImageWarm struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which images must be present on which nodes.
	// +required
	Spec ImageWarmSpec `json:"spec"`

	// status sums up the matching nodes' progress.
	// +optional
	Status ImageWarmStatus `json:"status,omitempty"`
}

// ImageWarmList is a list of ImageWarms.
//
// +kubebuilder:object:root=true
type ImageWarmList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageWarm `json:"items"`
}
