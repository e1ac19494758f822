package v1alpha1

// warmer's vocabulary: every condition type and reason an ImageWarm or a
// NodeWarm carries, and the reasons of the events the agent records, in one
// place. Both controllers use these names; the words are part of the API
// (users match on them in alerts and scripts), so a value never changes once
// released. A reason shared by two conditions or by a condition and an event
// is one constant.

// ImageWarm condition types.
const (
	// ConditionReady is True when every matching node has every image.
	ConditionReady = "Ready"
	// ConditionProgressing is True while some matching node is still pulling.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when some matching node failed to pull an
	// image.
	ConditionDegraded = "Degraded"
	// ConditionImagesResolved is True when every image the workloads of
	// spec.imagesFrom name is warmed, False when some are left out (too
	// many, or not valid references). Only an ImageWarm with imagesFrom has
	// it.
	ConditionImagesResolved = "ImagesResolved"
	// ConditionRollout is True when every matching node is admitted, False
	// while nodes wait for their wave or when the canary failed. Only an
	// ImageWarm with spec.rollout has it.
	ConditionRollout = "Rollout"
)

// Reasons of the ImageWarm's Ready, Progressing and Degraded conditions.
const (
	// ReasonAllNodesWarm: every matching node has every image.
	ReasonAllNodesWarm = "AllNodesWarm"
	// ReasonNoMatchingNodes: the nodeSelector matches no node.
	// What to do: check spec.nodeSelector against the nodes' labels (kubectl
	// get nodes --show-labels); control-plane nodes need a selector naming
	// their role.
	ReasonNoMatchingNodes = "NoMatchingNodes"
	// ReasonPulling: some matching node is still pulling or waiting to pull
	// an image. Also the agent's event when a pull starts.
	// What to do: wait; kubectl warmer status NAME --watch follows it.
	ReasonPulling = "Pulling"
	// ReasonNodesFailed: some matching node failed to pull an image.
	// What to do: kubectl warmer why NAME names each failing node's reason
	// and what to do.
	ReasonNodesFailed = "NodesFailed"
	// ReasonNotReporting: some matching node's agent has not reported on
	// the current generation of the spec.
	// What to do: check that an agent Pod runs and is Ready on those nodes
	// (kubectl -n warmer-system get pods -o wide) and read its log; a node
	// without one is outside the DaemonSet's nodeSelector or tolerations.
	ReasonNotReporting = "NotReporting"
	// ReasonSuspended: spec.suspend is set.
	// What to do: set spec.suspend to false to warm again.
	ReasonSuspended = "Suspended"
	// ReasonPullFailed: Degraded, some matching node failed to pull an
	// image.
	ReasonPullFailed = "PullFailed"
	// ReasonNoFailures: not Degraded.
	ReasonNoFailures = "NoFailures"
	// ReasonMinReadyNodesMet: spec.readiness.minReadyNodes of the counted
	// nodes have every image, though not all of them.
	ReasonMinReadyNodesMet = "MinReadyNodesMet"
	// ReasonNoSupportedNodes: every matching node lacks the platform of
	// some image.
	// What to do: build the images for the nodes' OS and architecture, or
	// select nodes of a platform they have.
	ReasonNoSupportedNodes = "NoSupportedNodes"
	// ReasonTooFewNodes: minReadyNodes asks for more nodes than can hold
	// the images.
	// What to do: lower spec.readiness.minReadyNodes or select more nodes.
	ReasonTooFewNodes = "TooFewNodes"
)

// Reasons of the ImageWarm's ImagesResolved condition (ReasonTooManyImages
// too).
const (
	// ReasonResolved: every image the workloads name is warmed.
	ReasonResolved = "Resolved"
	// ReasonInvalidImages: some template images are not valid references
	// and are left out.
	ReasonInvalidImages = "InvalidImages"
	// ReasonKindsNotWatched: imagesFrom reads a kind the controller does
	// not watch (--images-from-kinds); workloads of that kind are not read.
	ReasonKindsNotWatched = "KindsNotWatched"
)

// ReasonTooManyImages is the reason of ImagesResolved when the workloads
// name more images than one ImageWarm may warm (the first by name are), and
// of a NodeWarm's ImagesListed when the node wants more than MaxNodeImages.
const ReasonTooManyImages = "TooManyImages"

// ReasonImagesNotListed is the reason of an ImageWarm's Ready and
// Progressing conditions when some matching node wants more images, or
// matches more ImageWarms, than a NodeWarm lists and left some of this
// ImageWarm's images out of its report
// (status.nodes.unlisted): not a failure, but progress there cannot be
// seen.
// What to do: warm fewer images per node, or match fewer ImageWarms to it;
// the counts still hold.
const ReasonImagesNotListed = "ImagesNotListed"

// Reasons of the ImageWarm's Rollout condition.
const (
	// ReasonAllAdmitted: every matching node that lacks an image is
	// admitted.
	ReasonAllAdmitted = "AllAdmitted"
	// ReasonCanaryPulling: the canary is pulling; the other nodes wait for
	// it.
	// What to do: wait for the canary; its progress is in kubectl warmer
	// status NAME.
	ReasonCanaryPulling = "CanaryPulling"
	// ReasonWaves: nodes wait for a slot under maxPulling.
	// What to do: wait, or raise spec.rollout.maxPulling to let more nodes
	// pull at once.
	ReasonWaves = "Waves"
	// ReasonCanaryFailed: the canary failed; the rollout stopped.
	// What to do: fix what the canary's failure names, then change the spec
	// (or its images) to start a new rollout.
	ReasonCanaryFailed = "CanaryFailed"
)

// NodeWarm condition types.
const (
	// ConditionRuntimeReady says whether the container runtime answers.
	ConditionRuntimeReady = "RuntimeReady"
	// ConditionDiskPressure says whether pulls are held back because the
	// image filesystem is too full.
	ConditionDiskPressure = "DiskPressure"
	// ConditionPinning says whether the images asked to be pinned are.
	ConditionPinning = "Pinning"
	// ConditionYielding is on a NodeWarm only while the agent yields to
	// pulls the runtime makes for someone else (status True, reason
	// ReasonRuntimePulling): no warm pull starts then.
	ConditionYielding = "Yielding"
	// ConditionPullProgress is on a NodeWarm only while the agent cannot
	// see the bytes of the pulls under way (status False, reason
	// ReasonNoContentView): no images[].progress, no stalled pulls
	// caught.
	ConditionPullProgress = "PullProgress"
	// ConditionStartupTaint says where the node's startup taint stands:
	// True while the agent holds it, False once it is gone. Nodes that
	// never carried it have no such condition.
	ConditionStartupTaint = "StartupTaint"
	// ConditionImagesListed is on a NodeWarm only while its images list is
	// cut (status False, reason ReasonTooManyImages): the node wants more
	// than MaxNodeImages images. The counts still cover every image; an
	// ImageWarm image the list leaves out is counted as unlisted on that
	// node.
	ConditionImagesListed = "ImagesListed"
	// ConditionWarmsListed is on a NodeWarm only while its warms list is
	// cut (status False, reason ReasonTooManyImageWarms): more than
	// MaxNodeWarms ImageWarms match the node. An ImageWarm the list
	// leaves out counts the node as unlisted, not as not reporting.
	ConditionWarmsListed = "WarmsListed"
)

// ReasonTooManyImageWarms is the reason of a NodeWarm's WarmsListed when
// more than MaxNodeWarms ImageWarms match the node.
const ReasonTooManyImageWarms = "TooManyImageWarms"

// Reasons of the NodeWarm's RuntimeReady condition.
const (
	// ReasonRuntimeAnswering: the runtime answered the last CRI call.
	ReasonRuntimeAnswering = "RuntimeAnswering"
	// ReasonRuntimeNotAnswering: the runtime did not answer; the message
	// says how it failed.
	// What to do: check the container runtime on the node and the agent's
	// socket path (--cri-socket).
	ReasonRuntimeNotAnswering = "RuntimeNotAnswering"
)

// Reasons of the NodeWarm's DiskPressure condition.
const (
	// ReasonAboveThreshold: the image filesystem is fuller than the pull
	// threshold; no pull starts.
	// What to do: free space on the node's image filesystem, or raise the
	// agent's --image-fs-threshold-percent.
	ReasonAboveThreshold = "AboveThreshold"
	// ReasonBelowThreshold: the image filesystem is below the threshold.
	ReasonBelowThreshold = "BelowThreshold"
	// ReasonLevelUnknown: the image filesystem's level cannot be read;
	// pulls are not held back.
	// What to do: let the agent read its kubelet's /stats/summary (the
	// kubelet's serving certificate); the agent's log says why it cannot.
	ReasonLevelUnknown = "LevelUnknown"
)

// Reasons of the NodeWarm's Pinning condition.
const (
	// ReasonRuntimeCannotPin: the runtime offers no way to pin (not
	// containerd, containerd before 1.7, or its images API unreachable).
	// Images are warmed unpinned.
	ReasonRuntimeCannotPin = "RuntimeCannotPin"
	// ReasonPinFailed: the last pin or unpin failed; it is tried again.
	ReasonPinFailed = "PinFailed"
	// ReasonPinned: every present image asked to be pinned is.
	ReasonPinned = "Pinned"
	// ReasonNothingToPin: the runtime can pin; nothing asks for it.
	ReasonNothingToPin = "NothingToPin"
)

// ReasonRuntimePulling is the reason of the NodeWarm's Yielding
// condition: the runtime writes blobs none of the agent's pulls fetches
// (the kubelet pulling a starting Pod's image, most likely).
// What to do: nothing: the warm pulls start once the runtime's own pull
// ends.
const ReasonRuntimePulling = "RuntimePulling"

// Reasons of the NodeWarm's PullProgress condition.
const (
	// ReasonNoContentView: the runtime offers no view of its pulls' bytes
	// (not containerd, or its content API does not answer); pulls go on
	// without progress and stall detection.
	ReasonNoContentView = "NoContentView"
)

// Reasons of the NodeWarm's StartupTaint condition.
const (
	// ReasonTaintWaiting: some ImageWarm that asks for the taint is not
	// warm yet.
	ReasonTaintWaiting = "Waiting"
	// ReasonTaintRemoved: every ImageWarm that asks for it is warm;
	// removed.
	ReasonTaintRemoved = "Removed"
	// ReasonTaintNotRequested: no ImageWarm selecting the node asks for
	// it; removed at once.
	ReasonTaintNotRequested = "NotRequested"
	// ReasonTaintDeadlineExceeded: removed at the deadline, not warm.
	ReasonTaintDeadlineExceeded = "DeadlineExceeded"
	// ReasonTaintRemovedElsewhere: someone else removed it while the agent
	// held it.
	ReasonTaintRemovedElsewhere = "RemovedElsewhere"
	// ReasonTaintRemoveFailed: the agent decided to remove it, and the API
	// server refused; retried on the next pass.
	ReasonTaintRemoveFailed = "RemoveFailed"
)

// ConditionImagesWarm is the condition each agent keeps in its own
// Node's status.conditions (the only Node condition warmer writes), for
// readiness controllers to read: True when every image of every
// ImageWarm with spec.startupTaint that selects the node is present there,
// or when no such ImageWarm does; False while some image is missing. Its
// message counts the images and names a few missing ones. The agent's
// --node-signals=false leaves it unwritten.
const ConditionImagesWarm = "ImagesWarm"

// Reasons of the Node's ImagesWarm condition.
const (
	// ReasonImagesPresent: every image the startup-taint ImageWarms
	// selecting the node want is present.
	ReasonImagesPresent = "ImagesPresent"
	// ReasonImagesMissing: some image those ImageWarms want is not
	// present yet (pulling, waiting or failing).
	// What to do: wait; kubectl warmer why NAME names a failing node's
	// reason.
	ReasonImagesMissing = "ImagesMissing"
	// ReasonNothingToWarm: no ImageWarm with spec.startupTaint selects the
	// node; nothing holds it back.
	ReasonNothingToWarm = "NothingToWarm"
)

// Reasons of the events the agent records about an ImageWarm, and of a
// NodeWarm image's state where it is not a pull failure.
const (
	// ReasonPulled: an image was pulled (with --per-image-events).
	ReasonPulled = "Pulled"
	// ReasonWarmed: the last of an ImageWarm's images arrived on the node.
	ReasonWarmed = "Warmed"
	// ReasonFailed: a pull failed; the event's note says how.
	ReasonFailed = "Failed"
	// ReasonBackOff: the next pull of an image waits out its back-off.
	ReasonBackOff = "BackOff"
	// ReasonEvicted: a warmed image disappeared from the node.
	ReasonEvicted = "Evicted"
	// ReasonEvictedRepeatedly is an image's reason in the NodeWarm while
	// the node keeps removing it and the next pull waits.
	// What to do: set retention: Pinned, or leave the kubelet's image garbage
	// collection more room on the node.
	ReasonEvictedRepeatedly = "EvictedRepeatedly"
	// ReasonWaitingForRollout is a missing image's reason in the NodeWarm
	// while no ImageWarm that wants it has admitted the node in its
	// rollout.
	// What to do: wait for the node's wave (the ImageWarm's Rollout
	// condition).
	ReasonWaitingForRollout = "WaitingForRollout"
	// ReasonInvalidPullSecret: a pull secret an ImageWarm names is missing
	// or cannot be read as a docker config.
	// What to do: create the secret in the ImageWarm's namespace, of type
	// kubernetes.io/dockerconfigjson, and let warmer read it; the event's
	// note names the problem.
	ReasonInvalidPullSecret = "InvalidPullSecret"
	// ReasonStartupTaintRemoved: the node's startup taint was removed with
	// its images warm.
	ReasonStartupTaintRemoved = "StartupTaintRemoved"
	// ReasonStartupTaintDeadline: the node's startup taint was removed at
	// the deadline, without its images.
	ReasonStartupTaintDeadline = "StartupTaintDeadline"
)

// Reasons of a NodeWarm image whose pull failed: the pull engine's classes
// (pkg/pullengine, Class), worded like the kubelet's image pull reasons. The
// engine keeps its own constants so that it needs no API types; the agent's
// tests hold the two lists equal.
const (
	// ReasonInvalidImageName: the reference does not parse.
	// What to do: correct the reference in spec.images, or in the workload
	// imagesFrom reads.
	ReasonInvalidImageName = "InvalidImageName"
	// ReasonRegistryUnavailable: the registry could not be reached, cut the
	// connection or answered with a server error.
	// What to do: check that the nodes reach the registry (DNS, firewall,
	// proxy) and that it is up; the agent retries on its own.
	ReasonRegistryUnavailable = "RegistryUnavailable"
	// ReasonRateLimited: the registry answered 429 Too Many Requests.
	// What to do: wait, authenticate to the registry with a pull secret, use
	// a mirror, or pull on fewer nodes at once (spec.rollout.maxPulling).
	ReasonRateLimited = "RateLimited"
	// ReasonUnauthorized: the registry refused the credentials (or their
	// absence).
	// What to do: name a pull secret with access in spec.imagePullSecrets and
	// lend the namespace's secrets to warmer, or configure the node's
	// credential provider.
	ReasonUnauthorized = "Unauthorized"
	// ReasonNotFound: no such repository, tag or digest.
	// What to do: check the repository, tag or digest in the registry;
	// correct the reference.
	ReasonNotFound = "NotFound"
	// ReasonNoMatchingPlatform: the image exists, but not for the node's OS
	// and architecture.
	// What to do: build the image for the node's OS and architecture, or
	// select only nodes it has a platform for.
	ReasonNoMatchingPlatform = "NoMatchingPlatform"
	// ReasonArtifactsUnsupported: an entry of spec.artifacts, on a node
	// whose container runtime cannot mount OCI artifacts as image volumes
	// (containerd; CRI-O can). The agent pulls nothing: a Pod there could
	// not use what it fetched. The node counts as unsupported, not failed.
	// What to do: run Pods that mount the artifact on CRI-O nodes (select
	// only those in nodeSelector), or package the files as an image and
	// list it in spec.images.
	ReasonArtifactsUnsupported = "ArtifactsUnsupported"
	// ReasonSignatureValidationFailed: the runtime's signature policy
	// rejected the image.
	// What to do: sign the image as the runtime's policy asks, or change the
	// policy.
	ReasonSignatureValidationFailed = "SignatureValidationFailed"
	// ReasonTimeout: the pull timeout (or a runtime deadline) expired.
	// What to do: raise spec.pullTimeout, or find why the registry is slow.
	ReasonTimeout = "Timeout"
	// ReasonStalled: the pull's bytes stopped moving for the agent's
	// --pull-stall-timeout, and the agent cancelled it.
	// What to do: check the registry and the network between it and the node;
	// the agent retries on its own.
	ReasonStalled = "Stalled"
	// ReasonDiskPressure: the image filesystem is too full to start a
	// pull, or the runtime ran out of space.
	// What to do: free space on the node's image filesystem, or warm fewer or
	// smaller images there.
	ReasonDiskPressure = "DiskPressure"
	// ReasonCredentialProviderFailed: a credential-provider plugin that
	// matches the image failed, and the registry then refused the pull.
	// What to do: read the agent's log for the plugin's error and fix the
	// kubelet's credential provider configuration.
	ReasonCredentialProviderFailed = "CredentialProviderFailed"
	// ReasonErrImagePull: any other failure.
	// What to do: read the message and the agent's log on the node.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonCanceled: the pull was no longer wanted.
	// What to do: nothing: the image is no longer wanted there.
	ReasonCanceled = "Canceled"
)

// PullFailureReasons lists the reasons of a failed pull, in the order
// above.
var PullFailureReasons = []string{
	ReasonInvalidImageName, ReasonRegistryUnavailable, ReasonRateLimited,
	ReasonUnauthorized, ReasonNotFound, ReasonNoMatchingPlatform, ReasonArtifactsUnsupported,
	ReasonSignatureValidationFailed, ReasonTimeout, ReasonStalled, ReasonDiskPressure,
	ReasonCredentialProviderFailed, ReasonErrImagePull, ReasonCanceled,
}
