package gate

import (
	"fmt"
	"strings"
	"time"
)

// NodeState is how far one node the Pod may run on is with the Pod's
// images.
type NodeState struct {
	// Name is the node's name, for messages.
	Name string
	// Warm: every image of the Pod is present.
	Warm bool
	// Coming: not warm yet, but its agent is pulling or about to.
	Coming bool
	// Refused is set when the node refused an image for good (the
	// NodeWarm's reason, such as DiskPressure): waiting cannot help.
	Refused string
}

// Input is what Decide reads: one gated Pod's view of the cluster.
type Input struct {
	Now, Created time.Time
	Deadline     time.Duration
	// ImageWarmFound says the ImageWarm the Pod names exists.
	ImageWarmFound bool
	// Unlisted are the Pod's images the ImageWarm does not (yet) warm.
	Unlisted []string
	// Nodes are the nodes the Pod may run on.
	Nodes []NodeState
	// Note is added to a release's message: what was wrong with the
	// Pod's own settings (a deadline annotation out of range).
	Note string
}

// Decision is what to do with the gate.
type Decision struct {
	// Release removes the gate; Warm says the Pod proceeds warm.
	Release, Warm bool
	// Reason and Message go to the Pod condition (and, when not warm, an
	// event).
	Reason, Message string
	// RequeueAfter is when to look again if nothing changes before.
	RequeueAfter time.Duration
}

// Decide says whether the gate of one Pod goes now, and why (see the
// package doc for the rules).
func Decide(in Input) Decision {
	d := decide(in)
	if d.Release && in.Note != "" {
		d.Message += "; " + in.Note
	}
	return d
}

func decide(in Input) Decision {
	left := in.Created.Add(in.Deadline).Sub(in.Now)
	switch {
	case !in.ImageWarmFound:
		return cold(ReasonImageWarmNotFound, "the ImageWarm named by label "+LabelImageWarm+" does not exist in the Pod's namespace")
	case left <= 0:
		return cold(ReasonDeadlineExceeded, fmt.Sprintf("images not warm after %v; the Pod proceeds cold", in.Deadline))
	case len(in.Unlisted) > 0:
		return wait(left)
	case len(in.Nodes) == 0:
		return cold(ReasonNoEligibleNode, "no node matches the Pod's node selector, affinity and tolerations")
	}
	var warm, coming int
	var refused []string
	for _, n := range in.Nodes {
		switch {
		case n.Warm:
			warm++
		case n.Coming:
			coming++
		case n.Refused != "":
			refused = append(refused, n.Name+": "+n.Refused)
		}
	}
	switch {
	case warm > 0 && coming == 0:
		return Decision{Release: true, Warm: true, Reason: ReasonWarm,
			Message: fmt.Sprintf("images warm on %d of %d nodes the Pod may run on", warm, len(in.Nodes))}
	case len(refused) == len(in.Nodes):
		return cold(ReasonCannotWarm, "every node the Pod may run on refused an image: "+firstOf(refused, 3))
	}
	return wait(left)
}

func cold(reason, msg string) Decision {
	return Decision{Release: true, Reason: reason, Message: msg}
}

func wait(left time.Duration) Decision {
	return Decision{RequeueAfter: left}
}

// firstOf joins the first n items and counts the rest.
func firstOf(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}
