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
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// name of the ImageWarm.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// generation of the ImageWarm's spec the agent acts on.
	// +required
	Generation int64 `json:"generation"`
	// resolved is the hash of the ImageWarm's status.resolved images the
	// agent acts on, when the ImageWarm has imagesFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[a-f0-9]*$`
	Resolved string `json:"resolved,omitempty"`
	// servedStarts counts the containers the runtime started in the last
	// 24 hours from an image this ImageWarm wants, after this agent's
	// pull had brought the image: the ImageWarm's share of
	// status.servedStarts (a start from an image two ImageWarms want
	// counts for both). Written at a slow pace; at most 999999.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999
	ServedStarts int32 `json:"servedStarts,omitempty"`
}

// NodeImage is one wanted image's state on the node. It is kept small: a
// present image takes about 200 bytes, and every string is plain text.
type NodeImage struct {
	// image is the normalised reference, e.g. docker.io/library/nginx:latest
	// (a spec reference of up to 512 characters, plus the default registry
	// and tag).
	// +required
	// +kubebuilder:validation:MaxLength=544
	// +kubebuilder:validation:Pattern=`^[ !#-%'-;=?-\[\]-~]*$`
	Image string `json:"image"`
	// secretsNamespace is set on the entry of the ImageWarms of one
	// namespace that name pull secrets for the image: it is pulled, and
	// counts as present, with that namespace's pull secrets alone. Empty:
	// the entry of the ImageWarms, of any namespace, that name none,
	// pulled with node-wide credentials only (credential providers,
	// anonymous). One image may have several entries.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SecretsNamespace string `json:"secretsNamespace,omitempty"`
	// verified is true once this agent pulled the image with the entry's
	// credentials (for an image whose layers are there, a manifest
	// request). A Present entry without it counts under the agent's
	// --image-verification-policy: an image the agent never pulled (the
	// default), or one on its allowlist. A restarted agent trusts it for
	// the image of the same digest.
	// +optional
	Verified bool `json:"verified,omitempty"`
	// state is Present, Pulling, Queued, BackOff, Failed or Skipped.
	// +required
	State ImageState `json:"state"`
	// digest is the repository digest the image was resolved to, when the
	// runtime knows one (an image loaded rather than pulled has none).
	// +optional
	// +kubebuilder:validation:MaxLength=135
	// +kubebuilder:validation:Pattern=`^(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$`
	Digest string `json:"digest,omitempty"`
	// reason classifies the last failure, e.g. Unauthorized or NotFound;
	// on a present image, EvictedRepeatedly says the node keeps removing it
	// soon after it arrives. Reasons are single words of at most 32
	// characters (api/v1alpha1/conditions.go lists them).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]*$`
	Reason string `json:"reason,omitempty"`
	// message explains the last failure, cut to 224 characters, in plain
	// printable ASCII without the characters JSON escapes (", \, <, > and &).
	// +optional
	// +kubebuilder:validation:MaxLength=224
	// +kubebuilder:validation:Pattern=`^[ !#-%'-;=?-\[\]-~]*$`
	Message string `json:"message,omitempty"`
	// attempts counts pulls tried since the image was last present.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`
	// pinned is true when the runtime exempts the image from the kubelet's
	// garbage collection (pinned by warmer or by someone else).
	// +optional
	Pinned bool `json:"pinned,omitempty"`
	// retryAt is when the agent tries a BackOff image again on its own.
	// While the image keeps failing alike, the agent rewrites it at most
	// every --status-retry-interval (a minute by default), so it may lie
	// that far in the past.
	// +optional
	RetryAt *metav1.Time `json:"retryAt,omitempty"`
	// lastTransitionTime is when state last changed. It is left out for a
	// present image: what matters then is that it is there.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// warms are the ImageWarms that want the image, as indices into
	// status.warms (at most 16 listed).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=511
	Warms []int32 `json:"warms,omitempty"`
	// progress is how far the image's pull has come, on a Pulling image
	// whose bytes the agent can see (containerd; the PullProgress
	// condition says when it cannot).
	// +optional
	Progress *PullProgress `json:"progress,omitempty"`
}

// PullProgress is how far pulls under way have come, in compressed bytes
// of image configs and layers, as the runtime's content store shows them.
// Blobs the node held before a pull count as done. It is written at the
// status pacing: a change of bytes alone waits 2 s while few nodes pull
// fleet-wide, up to the agent's --pull-progress-interval when hundreds
// do.
type PullProgress struct {
	// bytesDone is how many of bytesTotal the node has.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999999
	BytesDone int64 `json:"bytesDone"`
	// bytesTotal is the compressed size of the images' configs and
	// layers (at most 10^15 - 1 bytes: the bound keeps the largest
	// NodeWarm within its budget).
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999999
	BytesTotal int64 `json:"bytesTotal"`
	// secondsLeft estimates the time left at the recent rate, at most
	// 9999999 (115 days); absent while there is no rate to go by
	// (nothing arrived lately).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999999
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
	// bytesUnpacked is what the layers unpacked so far, and those being
	// unpacked, take on the node's disk; absent where the runtime shows
	// no unpacking (containerd does, through its snapshots; CRI-O does
	// not).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999999999999
	BytesUnpacked *int64 `json:"bytesUnpacked,omitempty"`
}

// NodePullProgress is the sum of a node's pulls under way, with what
// they do.
type NodePullProgress struct {
	PullProgress `json:",inline"`
	// phase is what the node's pulls do: Downloading while blobs of any
	// arrive (layers may unpack meanwhile), Unpacking once every blob is
	// in and the runtime unpacks the layers. An image's own entry says
	// none, to keep the largest NodeWarm within its budget: it downloads
	// while bytesDone < bytesTotal.
	// +optional
	// +kubebuilder:validation:Enum=Downloading;Unpacking
	Phase PullPhase `json:"phase,omitempty"`
}

// PullPhase is what a pull under way does.
type PullPhase string

// PhaseOf is what the pull of one image's entry p does: Downloading while
// bytes are missing, then Unpacking; "" without progress.
func PhaseOf(p *PullProgress) PullPhase {
	switch {
	case p == nil:
		return ""
	case p.BytesDone < p.BytesTotal:
		return PullPhaseDownloading
	}
	return PullPhaseUnpacking
}

// Phases of a pull under way.
const (
	// PullPhaseDownloading: blobs are still arriving.
	PullPhaseDownloading PullPhase = "Downloading"
	// PullPhaseUnpacking: every blob is in; the runtime unpacks.
	PullPhaseUnpacking PullPhase = "Unpacking"
)

// KEMX25519 is the HPKE KEM identifier (RFC 9180) of DHKEM(X25519,
// HKDF-SHA256), the one KEM credential keys use.
const KEMX25519 = 0x0020

// CredentialKey is an agent's HPKE public key (RFC 9180): the controller
// seals the node's pull credentials to it, and only the agent holding
// the private key opens them.
type CredentialKey struct {
	// kem is the HPKE KEM identifier: 32, DHKEM(X25519, HKDF-SHA256).
	// +required
	// +kubebuilder:validation:Enum=32
	KEM int32 `json:"kem"`
	// publicKey is the KEM's serialised public key: 32 bytes for X25519
	// (44 characters of base64). The pattern admits exactly 32 bytes; a
	// CEL size() rule cannot be used, as the API server's CEL decodes
	// format byte as URL-safe base64 and refuses a "+" in valid input.
	// +required
	// +kubebuilder:validation:MinLength=44
	// +kubebuilder:validation:MaxLength=44
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`
	PublicKey []byte `json:"publicKey"`
}

// NodeWarmStatus is one node agent's report.
type NodeWarmStatus struct {
	// runtime is the node's container runtime.
	// +optional
	Runtime RuntimeInfo `json:"runtime,omitempty"`
	// imageFilesystem is the usage of the runtime's image filesystem.
	// +optional
	ImageFilesystem *ImageFilesystem `json:"imageFilesystem,omitempty"`
	// credentialProviders names the kubelet credential-provider plugins
	// the agent runs for pulls (--image-credential-provider-config), in
	// the configuration's order. Names only: never a credential.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	CredentialProviders []string `json:"credentialProviders,omitempty"`
	// credentialKey is the public key the controller seals this node's
	// pull credentials to (its credential bundle, docs/security.md). The
	// agent makes the key pair when it starts and keeps the private key
	// in memory only; only the node's own agent may set it (the
	// warmer-agent-own-nodewarm admission policy). Empty until the agent
	// has published one.
	// +optional
	CredentialKey *CredentialKey `json:"credentialKey,omitempty"`
	// conditions describe the agent: RuntimeReady, DiskPressure, Pinning,
	// Yielding, PullProgress, StartupTaint, and ImagesListed and
	// WarmsListed while the images or warms lists are cut (eight types:
	// the bound holds each once).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 768)",message="condition messages must be at most 768 characters"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// warms are the ImageWarms that apply to this node, with the generation
	// the agent acts on, sorted by namespace and name; images[].warms index
	// this list. Past 512, the 512 listed are taken in turn by their
	// namespaces (condition WarmsListed).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Warms []WarmRef `json:"warms,omitempty"`
	// images is every wanted image's state, sorted by image and
	// secretsNamespace: one entry per image and credentials.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
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
	// pullProgress sums the progress of the images being pulled (those
	// with progress), with the time left for all of them at their
	// combined rate.
	// +optional
	PullProgress *NodePullProgress `json:"pullProgress,omitempty"`
	// progress says pullProgress for people, e.g. "412 MiB of 1.2 GiB
	// (33%), 2m left"; empty when nothing is being pulled that the agent
	// can see into.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Progress string `json:"progress,omitempty"`
	// servedStarts counts the containers the runtime started in the last
	// 24 hours from an image this agent had pulled, fetching its bytes,
	// before the container was created: starts that did not wait for
	// that pull (containerd only; counted since the agent started).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ServedStarts int32 `json:"servedStarts,omitempty"`
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
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`,description="Bytes of the pulls under way, and the time left"
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
