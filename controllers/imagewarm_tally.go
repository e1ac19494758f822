package controllers

import (
	"sort"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// warmTally counts one ImageWarm's matching nodes, one node at a time, in
// memory that does not grow with the number of nodes.
type warmTally struct {
	namespace, name string
	generation      int64

	// slots maps a normalised reference to its slot; spec images that
	// normalise alike ("nginx", "nginx:latest") share one.
	slots  map[string]int
	slotOf []int // by spec index
	// entries is the current node's report for each slot; reused per node.
	entries []*warmv1.NodeImage

	nodes    warmv1.NodeCounts
	images   []warmv1.ImageFleetStatus // by spec index
	digests  []digestVote              // by spec index
	failures []rankedFailure           // the first MaxReportedFailures, in order
}

// rankedFailure is a failure with its spec index, by which failures of one
// node are ordered.
type rankedFailure struct {
	image   int
	failure warmv1.NodeFailure
}

// digestVote tracks whether every node that has an image resolved it to the
// same digest.
type digestVote struct {
	digest string
	split  bool
}

func (v *digestVote) add(digest string) {
	switch {
	case digest == "" || v.split:
		// A node without a repository digest (an image loaded, not pulled)
		// neither confirms nor contradicts the others.
	case v.digest == "":
		v.digest = digest
	case v.digest != digest:
		v.digest, v.split = "", true
	}
}

func newTally(iw *warmv1.ImageWarm) *warmTally {
	n := len(iw.Spec.Images)
	t := &warmTally{
		namespace:  iw.Namespace,
		name:       iw.Name,
		generation: iw.Generation,
		slots:      make(map[string]int, n),
		slotOf:     make([]int, n),
		images:     make([]warmv1.ImageFleetStatus, n),
		digests:    make([]digestVote, n),
	}
	for i, img := range iw.Spec.Images {
		t.images[i].Image = string(img)
		key := reportKey(string(img))
		s, ok := t.slots[key]
		if !ok {
			s = len(t.slots)
			t.slots[key] = s
		}
		t.slotOf[i] = s
	}
	t.entries = make([]*warmv1.NodeImage, len(t.slots))
	return t
}

// reportKey is the image field under which agents report a spec image: its
// normalised reference, or the reference as written when it does not parse.
func reportKey(image string) string {
	ref, err := pullengine.ParseReference(image)
	if err != nil {
		return image
	}
	return ref.String()
}

// addNode counts one matching node given its agent's report, nil if none.
func (t *warmTally) addNode(node string, nw *warmv1.NodeWarm) {
	t.nodes.Matching++
	if !t.reportedBy(nw) {
		t.nodes.NotReporting++
		return
	}
	clear(t.entries)
	reported := nw.Status.Images
	for j := range reported {
		if s, ok := t.slots[reported[j].Image]; ok {
			t.entries[s] = &reported[j]
		}
	}
	ready, failed := true, false
	for i := range t.images {
		e := t.entries[t.slotOf[i]]
		switch {
		case e != nil && e.State == warmv1.ImagePresent:
			t.images[i].Ready++
			t.digests[i].add(e.Digest)
		case e != nil && (e.State == warmv1.ImageFailed || e.State == warmv1.ImageBackOff):
			t.images[i].Failed++
			t.addFailure(node, i, e)
			ready, failed = false, true
		default: // Queued, Pulling, Skipped or not listed yet
			t.images[i].Pulling++
			ready = false
		}
	}
	switch {
	case failed:
		t.nodes.Failed++
	case ready:
		t.nodes.Ready++
	default:
		t.nodes.Pulling++
	}
}

// reportedBy says whether the agent's report covers this ImageWarm's current
// spec; a report on an older generation says nothing about the new images.
func (t *warmTally) reportedBy(nw *warmv1.NodeWarm) bool {
	if nw == nil {
		return false
	}
	for _, w := range nw.Status.Warms {
		if w.Name == t.name && w.Namespace == t.namespace {
			return w.Generation >= t.generation
		}
	}
	return false
}

// addFailure keeps the failure if it is among the first MaxReportedFailures
// by node, then spec order. Whatever order the nodes come in, the same
// failures are kept in the same order, so the status does not churn.
func (t *warmTally) addFailure(node string, image int, e *warmv1.NodeImage) {
	pos := sort.Search(len(t.failures), func(k int) bool {
		f := &t.failures[k]
		return f.failure.Node > node || (f.failure.Node == node && f.image > image)
	})
	if pos >= warmv1.MaxReportedFailures {
		return
	}
	reason := e.Reason
	if reason == "" {
		reason = string(e.State)
	}
	f := rankedFailure{image: image, failure: warmv1.NodeFailure{
		Node:    node,
		Image:   t.images[image].Image,
		Reason:  reason,
		Message: truncate.String(e.Message, warmv1.MaxMessageLength),
	}}
	if len(t.failures) < warmv1.MaxReportedFailures {
		t.failures = append(t.failures, rankedFailure{})
	}
	copy(t.failures[pos+1:], t.failures[pos:]) // drops the last when full
	t.failures[pos] = f
}

// imageStatuses is the per-image part of the status, digests included.
func (t *warmTally) imageStatuses() []warmv1.ImageFleetStatus {
	for i := range t.images {
		t.images[i].Digest = t.digests[i].digest
	}
	return t.images
}

// nodeFailures is the capped failure list, nil when there is none, as the API
// server returns an empty list.
func (t *warmTally) nodeFailures() []warmv1.NodeFailure {
	if len(t.failures) == 0 {
		return nil
	}
	out := make([]warmv1.NodeFailure, len(t.failures))
	for i := range t.failures {
		out[i] = t.failures[i].failure
	}
	return out
}
