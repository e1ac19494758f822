package gate

// The names the gate shares with its admission policy
// (config/components/warm-gate) and with users' pod templates.
const (
	// GateName is the scheduling gate added to opted-in Pods.
	GateName = "warmer.dev/warm"
	// LabelImageWarm opts a Pod in; its value names the ImageWarm, of the
	// Pod's own namespace, that warms the Pod's images.
	LabelImageWarm = "warmer.dev/warm-gate"
	// AnnotationDeadline is how long the Pod may wait, a Go duration.
	AnnotationDeadline = "warmer.dev/warm-gate-deadline"
	// ConditionWarm is the Pod condition set when the gate goes.
	ConditionWarm = "warmer.dev/Warm"
	// ArmingLease is the Lease, in the controller's namespace, whose
	// existence arms the admission policy.
	ArmingLease = "warmer-warm-gate"
)

// Reasons of the Pod condition and of the events.
const (
	// ReasonWarm: the images are on the nodes the Pod may run on.
	ReasonWarm = "Warm"
	// ReasonDeadlineExceeded: the deadline passed; the Pod proceeds cold.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonImageWarmNotFound: the label names no ImageWarm of the Pod's
	// namespace (never did, or it was deleted).
	ReasonImageWarmNotFound = "ImageWarmNotFound"
	// ReasonNoEligibleNode: no node may run the Pod; the scheduler says
	// why.
	ReasonNoEligibleNode = "NoEligibleNode"
	// ReasonCannotWarm: every node the Pod may run on refused an image for
	// good (the node's reason is in the message).
	ReasonCannotWarm = "CannotWarm"
)
