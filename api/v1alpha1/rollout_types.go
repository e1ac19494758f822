package v1alpha1

import "k8s.io/apimachinery/pkg/util/intstr"

// Rollout spreads an ImageWarm's pulls over the fleet in waves, so that a
// thousand nodes do not ask one registry for the same image at once, and
// can try one node first (a canary) so that an image that cannot be pulled
// fails there rather than everywhere.
//
// Each matching node has a stable place in the rollout, a hash of the
// ImageWarm's UID and the node's name: the controller admits nodes in that
// order and publishes how far it went in status.rollout; each agent works
// out from that one field whether its node is admitted. A node that
// joins later with a place below the bound pulls at once. A matching node
// whose agent has not reported yet holds a slot for a minute; after that
// the rollout passes over it.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxPulling) || (has(self.canary) && self.canary)",message="rollout must set maxPulling, canary: true, or both"
type Rollout struct {
	// maxPulling is how many matching nodes may be pulling this
	// ImageWarm's images at once: a number (1 or more), or a percentage of
	// the matching nodes, rounded up, at least one node. Nodes that
	// already have every image take no slot; a node that failed gives its
	// slot up (its failure is reported as usual). Absent means no bound.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? int(self) >= 1 : string(self).matches('^(100|[1-9][0-9]?)%$')",message="maxPulling must be a number of nodes (1 or more) or a percentage from 1% to 100%, such as 10%"
	MaxPulling *intstr.IntOrString `json:"maxPulling,omitempty"`

	// canary, when true, admits one node first (the first in rollout
	// order); the rest are admitted only once it has every image. If it
	// fails, the rollout stops there and the Rollout condition says
	// CanaryFailed; a new spec (or a new set of resolved images) starts a
	// new rollout.
	// +optional
	Canary bool `json:"canary,omitempty"`
}

// RolloutStatus is how far the controller let the current rollout go. It
// is one bound, not a list of nodes: its size does not grow with the
// fleet.
type RolloutStatus struct {
	// generation is the spec generation this rollout is for; agents do not
	// take a rollout of another generation as admitting them.
	// +required
	Generation int64 `json:"generation"`

	// resolved is the hash of status.resolved's images this rollout is
	// for; "" without imagesFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[a-f0-9]*$`
	Resolved string `json:"resolved,omitempty"`

	// admittedBelow admits every matching node whose place (a 32-bit hash
	// of the ImageWarm's UID and the node's name) is below it: 0 admits
	// none, 4294967296 every node.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967296
	AdmittedBelow int64 `json:"admittedBelow"`

	// admitted is the number of matching nodes admitted.
	// +optional
	Admitted int32 `json:"admitted"`

	// waiting is the number of matching nodes not admitted yet that lack
	// some image.
	// +optional
	Waiting int32 `json:"waiting"`
}

// AdmitAll is the bound that admits every node.
const AdmitAll int64 = 1 << 32
