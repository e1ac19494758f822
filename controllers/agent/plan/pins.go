package plan

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"
)

// The planner's pinning decisions. An image is pinned while an ImageWarm
// with retention Pinned wants it on the node and unpinned when none does;
// warmer pins only what the runtime reports unpinned, and unpins only names
// carrying its own mark, so a pin someone else made is never taken away.

// PinView is what a pass knows of the runtime's pins.
type PinView struct {
	// Unable says why the runtime cannot pin; "" when it can.
	Unable string
	// Mine are the image names that carry warmer's mark.
	Mine map[string]bool
	// Problem is why warmer's pins could not be listed; "" for none. A pin
	// or unpin that fails later in the pass comes through Output.Applied.
	// Mine is then unknown, not empty.
	Problem string
}

// marksKnown says whether Mine holds warmer's marks as the runtime has
// them: not when listing them failed.
func (v PinView) marksKnown() bool { return v.Problem == "" }

// pinTally counts, over one pass, the present images asked to be pinned
// and those of them pinned.
type pinTally struct {
	asked, pinned int
}

// pinImage decides whether to pin one wanted image and whether it counts
// as pinned. An image the runtime already reports pinned, by warmer or by
// anyone, is left as it is; so is one warmer marked, which the runtime may
// not have reported yet.
//
// Pins are the image's, not an entry's: an image is pinned under its
// reference. An entry pins it, and keeps warmer's pin, only while the
// image counts as present for it: its own credentials brought it, or the
// operator's verification policy waives the proof (which it never does
// for another namespace's private image). An entry that has not proved
// access keeps nothing, not even while its pull is under way (on
// containerd that pull replaces the labels, pin included) or while it is
// suspended: an ImageWarm whose credentials never fetched the image cannot
// keep another namespace's image on the node after that namespace let it
// go.
func (p *planner) pinImage(w *wantedImage, v imageView) bool {
	name := w.refKey
	pinned := v.listed && v.listing.Pinned || p.in.Pins.Mine[name] && v.present
	if w.pin && v.present {
		p.pinKept[name] = true
	}
	if !w.pin || !v.present {
		return pinned
	}
	p.pinTally.asked++
	if !pinned && p.in.Pins.Unable == "" {
		if !slices.Contains(p.out.Pins, name) { // another entry of it may have asked
			p.out.Pins = append(p.out.Pins, name)
		}
		pinned = true // the shell pins it in this pass
	}
	if pinned {
		p.pinTally.pinned++
	}
	return pinned
}

// unpins lists the names warmer marked that no Pinned ImageWarm wants any
// more, in order.
func (p *planner) unpins() {
	for name := range p.in.Pins.Mine {
		if !p.pinKept[name] {
			p.out.Unpins = append(p.out.Unpins, name)
		}
	}
	sort.Strings(p.out.Unpins)
}

// pinningCondition returns conds with Pinning set, from what the pass
// knew of the runtime's pins and what it counted.
func pinningCondition(conds []metav1.Condition, pins PinView, t pinTally, now metav1.Time) []metav1.Condition {
	c := metav1.Condition{Type: warmv1.ConditionPinning, Status: metav1.ConditionTrue}
	switch {
	case pins.Unable != "":
		c.Status, c.Reason = metav1.ConditionFalse, warmv1.ReasonRuntimeCannotPin
		c.Message = pins.Unable + "; images of ImageWarms with retention Pinned are warmed, but the kubelet may collect them"
	case pins.Problem != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, warmv1.ReasonPinFailed, pins.Problem
	case t.asked == 0:
		c.Reason, c.Message = warmv1.ReasonNothingToPin, "The runtime can pin images; no present image is asked to be pinned"
	default:
		c.Reason, c.Message = warmv1.ReasonPinned, fmt.Sprintf("%d of %d present images asked to be pinned are pinned", t.pinned, t.asked)
	}
	c.Message = truncate.String(c.Message, warmv1.MaxNodeConditionMessageLength)
	return setCondition(conds, c, now)
}
