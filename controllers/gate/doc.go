// Package gate holds rollouts back until their images are warm: the
// controller that removes the warmer.dev/warm scheduling gate, which the
// MutatingAdmissionPolicy of config/components/warm-gate adds to new Pods
// that opt in with the warmer.dev/warm-gate label (its value names the
// ImageWarm of the Pod's namespace that warms them).
//
// When a gate goes (Decide, a pure function of the Pod's view of the
// cluster and the time):
//
//   - warm: every image of the Pod is present on at least one node the Pod
//     may run on (its required node affinity, node selector and taints),
//     and no such node is still on its way (pulling, queued, or its agent
//     not yet acting on the ImageWarm's current images). Waiting for the
//     nodes still pulling, not just the first one warm, is what lets the
//     scheduler spread a rollout's Pods over warm nodes instead of piling
//     the first ones onto cold nodes;
//   - at the Pod's deadline (annotation warmer.dev/warm-gate-deadline,
//     default 10m, at most 1h): it proceeds cold;
//   - at once when nothing can warm it: the ImageWarm is gone, no node may
//     run the Pod, or every node it may run on refused the image for good
//     (disk too small for it, no matching platform).
//
// Each release sets the Pod condition warmer.dev/Warm (True when warm,
// False with the reason otherwise) before the gate is removed, so a
// controller stopped between the two writes finds the gate again and
// removes it; a release that is not warm also gets a Warning event.
//
// Nothing holds a Pod for ever: the controller lists every gated Pod when
// it starts and releases the overdue ones at once; the admission policy
// adds the gate only while the controller's arming Lease exists (the
// controller creates it at start, owned by its own Pod, and deletes it at
// a clean stop).
package gate
