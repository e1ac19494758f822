package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Readiness says what Ready means for one ImageWarm, so that a fleet with
// a node that can never hold the images (a virtual node without an agent, a
// node whose agent is down) can still be waited for.
type Readiness struct {
	// minReadyNodes is how many of the nodes that count must have every
	// image for Ready to be True: a number, or a percentage of the counted
	// nodes rounded up, as a PodDisruptionBudget's minAvailable. The counted
	// nodes are the matching nodes except those whose platform some image
	// lacks (status.nodes.unsupported). A number above the counted nodes
	// cannot be met. 100% when unset.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? int(self) >= 0 : string(self).matches('^(100|[1-9]?[0-9])%$')",message="minReadyNodes must be a number of nodes (0 or more) or a percentage from 0% to 100%, such as 90%"
	MinReadyNodes *intstr.IntOrString `json:"minReadyNodes,omitempty"`
}

// SilentNode is a matching node whose agent has not reported on the
// ImageWarm's current generation.
type SilentNode struct {
	// node is the name of the node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// since is when the node's silence began: the later of when the
	// controller first saw the ImageWarm's current generation and when
	// the Node was created.
	// +required
	Since metav1.Time `json:"since"`
}

// MaxReportedSilentNodes is the most silent nodes an ImageWarm's status
// names.
const MaxReportedSilentNodes = 10
