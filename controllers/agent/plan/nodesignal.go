package plan

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// The node's own signals, decided: the warm label of each ImageWarm with
// spec.nodeLabel that holds every image on the node, and the Node's
// ImagesWarm condition over the ImageWarms with spec.startupTaint. Both
// use the pass's notion of an image that is done (present for the entry
// that wants it, under its own credentials, with no pull unaccounted
// for), as the startup taint does, so the label, the condition and the
// taint never disagree.

// NodeSignal is what the Node's ImagesWarm condition should say.
type NodeSignal struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// warmTally counts one ImageWarm's entries on the node.
type warmTally struct{ want, done int }

// nodeSignals sets the plan's NodeLabels and ImagesWarm from done, each
// entry's key mapped to whether it is done.
func (p *planner) nodeSignals(done map[string]bool) {
	d := &p.in.Desired
	tally := map[types.NamespacedName]*warmTally{}
	count := func(nn types.NamespacedName, ok bool) {
		t := tally[nn]
		if t == nil {
			t = &warmTally{}
			tally[nn] = t
		}
		t.want++
		if ok {
			t.done++
		}
	}
	var want, have int
	for _, key := range d.Keys() {
		w := d.images[key]
		for _, nn := range w.warms {
			count(nn, done[key])
		}
		if slices.ContainsFunc(w.warms, func(nn types.NamespacedName) bool { return d.holdTaint[nn] }) {
			want++
			if done[key] {
				have++
			}
		}
	}
	for _, bad := range d.invalid {
		count(bad.warm, false)
		if d.holdTaint[bad.warm] {
			want++
		}
	}
	for nn := range d.labelled {
		// An ImageWarm with no image yet (imagesFrom not resolved) holds
		// nothing the label could promise.
		if t := tally[nn]; t != nil && t.want > 0 && t.done == t.want {
			p.out.NodeLabels = append(p.out.NodeLabels, warmv1.NodeLabelKey(nn.Namespace, nn.Name))
		}
	}
	slices.Sort(p.out.NodeLabels)
	p.out.ImagesWarm = imagesWarm(len(d.holdTaint), want, have)
}

// imagesWarm words the ImagesWarm condition. With no startup-taint
// ImageWarm selecting the node it is True (NothingToWarm), not absent: a
// readiness rule that waits for True would otherwise hold such a node for
// ever. Its message moves only with the number of those ImageWarms, not
// with each image that arrives: every change is a write of the Node, which
// every Node watcher of the cluster receives, and the NodeWarm already
// says which images are missing.
func imagesWarm(warms, want, have int) NodeSignal {
	switch {
	case warms == 0:
		return NodeSignal{Status: corev1.ConditionTrue, Reason: warmv1.ReasonNothingToWarm,
			Message: "No ImageWarm with startupTaint selects this node"}
	case have == want:
		return NodeSignal{Status: corev1.ConditionTrue, Reason: warmv1.ReasonImagesPresent,
			Message: fmt.Sprintf("Every image of the %d ImageWarms with startupTaint is present", warms)}
	}
	return NodeSignal{Status: corev1.ConditionFalse, Reason: warmv1.ReasonImagesMissing,
		Message: fmt.Sprintf("Images of the %d ImageWarms with startupTaint are missing; the node's NodeWarm lists each", warms)}
}
