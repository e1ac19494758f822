package imagewarm

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// warmTally counts one ImageWarm's matching nodes, one node at a time, in
// memory that does not grow with the number of nodes.
type warmTally struct {
	namespace, name string
	generation      int64
	// resolved is the hash of the images imagesFrom resolved to, which a
	// report must echo; "" without imagesFrom.
	resolved string

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
	silent   silentNodes               // the first MaxReportedSilentNodes, by name
	progress fleetProgress
	// served sums the nodes' starts served warm from this ImageWarm's
	// images.
	served int64
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
		v.split = true
	}
}

func newTally(iw *warmv1.ImageWarm) *warmTally {
	all := warmImages(iw)
	n := len(all)
	t := &warmTally{
		namespace:  iw.Namespace,
		name:       iw.Name,
		generation: iw.Generation,
		resolved:   iw.ResolvedHash(),
		slots:      make(map[string]int, n),
		slotOf:     make([]int, n),
		images:     make([]warmv1.ImageFleetStatus, n),
		digests:    make([]digestVote, n),
	}
	for i, img := range all {
		t.images[i].Image = img
		key := reportKey(img)
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
	ref, err := imageref.Parse(image)
	if err != nil {
		return image
	}
	return ref.String()
}

// nodeOutcome is how far one matching node is with an ImageWarm, as a
// rollout sees it.
type nodeOutcome struct {
	state nodeState
	// image and reason are the node's first failure, when it failed.
	image, reason string
}

// nodeState classes a node for a rollout.
type nodeState int

const (
	nodePulling     nodeState = iota // lacks an image, or has not reported on the spec
	nodeReady                        // has every image
	nodeFailed                       // failed to pull some image
	nodeUnsupported                  // lacks the platform of some image
	nodeNoAgent                      // has no NodeWarm at all
)

// addNode counts one matching node given its agent's report, nil if none.
// since is when the node's silence began, should it have no report.
func (t *warmTally) addNode(node string, since metav1.Time, nw *warmv1.NodeWarm) nodeOutcome {
	t.nodes.Matching++
	if w := t.listedIn(nw); w != nil {
		// Starts already served count whatever generation the agent is on.
		t.served += int64(w.ServedStarts)
	}
	if t.leftOut(nw) {
		return t.addLeftOut()
	}
	if !t.reportedBy(nw) {
		t.nodes.NotReporting++
		t.silent.add(node, since)
		if nw == nil {
			return nodeOutcome{state: nodeNoAgent}
		}
		return nodeOutcome{state: nodePulling}
	}
	t.takeEntries(nw)
	ready, failed, unsupported, notListed := true, false, false, false
	unlisted := unlistedEntry(nw)
	var out nodeOutcome
	for i := range t.images {
		e := t.entries[t.slotOf[i]]
		if e == nil && unlisted != nil {
			e = unlisted
		}
		switch {
		case e != nil && e == unlisted:
			t.images[i].Unlisted++
			ready, notListed = false, true
		case e != nil && e.State == warmv1.ImagePresent:
			t.images[i].Ready++
			t.digests[i].add(e.Digest)
		case lacksPlatform(e):
			// Not a failure of the image: this node can never hold it.
			t.images[i].Unsupported++
			ready, unsupported = false, true
		case failing(e):
			t.images[i].Failed++
			t.addFailure(node, i, e)
			if !failed {
				out.image, out.reason = t.images[i].Image, failureReason(e)
			}
			ready, failed = false, true
		default: // Queued, Pulling, Skipped or not listed yet
			t.images[i].Pulling++
			ready = false
		}
	}
	t.progress.add(node, t.entries)
	switch {
	case failed:
		t.nodes.Failed++
		out.state = nodeFailed
	case unsupported:
		t.nodes.Unsupported++
		out.state = nodeUnsupported
	case notListed:
		// Its progress cannot be seen: for a rollout, still pulling.
		t.nodes.Unlisted++
	case ready:
		t.nodes.Ready++
		out.state = nodeReady
	default:
		t.nodes.Pulling++
	}
	return out
}

// leftOut says whether the report leaves this ImageWarm out of its warms
// because more ImageWarms match the node than a NodeWarm lists: the agent
// still warms its images, but says nothing of them for it.
func (t *warmTally) leftOut(nw *warmv1.NodeWarm) bool {
	if nw == nil || t.listedIn(nw) != nil {
		return false
	}
	c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionWarmsListed)
	return c != nil && c.Status == metav1.ConditionFalse
}

// addLeftOut counts a node whose report left this ImageWarm out as
// unlisted, every image with it: its progress there cannot be seen. For
// a rollout, the node is still pulling.
func (t *warmTally) addLeftOut() nodeOutcome {
	t.nodes.Unlisted++
	for i := range t.images {
		t.images[i].Unlisted++
	}
	return nodeOutcome{state: nodePulling}
}

// addDeadAgent counts a matching node whose agent is dead (liveness.go)
// since then: not reporting, whatever its last report said, and holding
// no rollout slot.
func (t *warmTally) addDeadAgent(node string, since metav1.Time) nodeOutcome {
	t.nodes.Matching++
	t.nodes.NotReporting++
	t.silent.add(node, since)
	return nodeOutcome{state: nodeNoAgent}
}

// takeEntries indexes the report's entries of this ImageWarm's images. An
// image may have an entry per namespace whose pull secrets it is pulled
// with: this ImageWarm's is its namespace's, if the node has one, else
// the node-wide one.
func (t *warmTally) takeEntries(nw *warmv1.NodeWarm) {
	clear(t.entries)
	reported := nw.Status.Images
	for j := range reported {
		e := &reported[j]
		if e.SecretsNamespace != "" && e.SecretsNamespace != t.namespace {
			continue
		}
		if s, ok := t.slots[e.Image]; ok && (t.entries[s] == nil || e.SecretsNamespace != "") {
			t.entries[s] = e
		}
	}
}

// failing says whether an entry's image failed to pull on the node, and
// has not been pulled since: failed, backing off, or being retried.
func failing(e *warmv1.NodeImage) bool {
	return e != nil && (e.State == warmv1.ImageFailed || e.State == warmv1.ImageBackOff || retrying(e))
}

// retrying says whether an entry is the retry of a failing pull, queued
// or under way: its last pull failed and none has succeeded since. It
// counts as failed until one does, as the entries between its retries
// (BackOff) do: otherwise a fleet whose every node fails would show a
// node pulling whenever an agent's report caught a retry.
func retrying(e *warmv1.NodeImage) bool {
	return e.Attempts > 0 && (e.State == warmv1.ImagePulling || e.State == warmv1.ImageQueued) &&
		e.Reason != warmv1.ReasonWaitingForRollout
}

// failureReason is a failed entry's reason, its state when it has none.
func failureReason(e *warmv1.NodeImage) string {
	if e.Reason == "" {
		return string(e.State)
	}
	return e.Reason
}

// unlistedEntry is what stands for an image a node's report leaves out
// because the node wants more images than a NodeWarm lists: not a
// failure (the agent still warms it), but progress that cannot be seen,
// counted as unlisted. nil while the report lists every image (an image
// not listed is then not taken in yet).
func unlistedEntry(nw *warmv1.NodeWarm) *warmv1.NodeImage {
	c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionImagesListed)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return &warmv1.NodeImage{State: warmv1.ImageQueued, Reason: warmv1.ReasonTooManyImages}
}

// lacksPlatform says whether a node's entry says the node can never hold
// the image: it has no variant for the node's OS and architecture, or it
// is an artifact the node's runtime cannot mount.
func lacksPlatform(e *warmv1.NodeImage) bool {
	return e != nil && (e.State == warmv1.ImageFailed || e.State == warmv1.ImageBackOff) &&
		(e.Reason == warmv1.ReasonNoMatchingPlatform || e.Reason == warmv1.ReasonArtifactsUnsupported)
}

// reportedBy says whether the agent's report covers this ImageWarm's current
// spec and resolved images; a report on an older generation, or on another
// set of resolved images, says nothing about the new images.
func (t *warmTally) reportedBy(nw *warmv1.NodeWarm) bool {
	w := t.listedIn(nw)
	return w != nil && w.Generation >= t.generation && w.Resolved == t.resolved
}

// listedIn is this ImageWarm's entry in the report's warms; nil if none.
func (t *warmTally) listedIn(nw *warmv1.NodeWarm) *warmv1.WarmRef {
	if nw == nil {
		return nil
	}
	for i := range nw.Status.Warms {
		if w := &nw.Status.Warms[i]; w.Name == t.name && w.Namespace == t.namespace {
			return w
		}
	}
	return nil
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
	f := rankedFailure{image: image, failure: warmv1.NodeFailure{
		Node:    node,
		Image:   t.images[image].Image,
		Reason:  failureReason(e),
		Message: truncate.String(e.Message, warmv1.MaxMessageLength),
	}}
	if len(t.failures) < warmv1.MaxReportedFailures {
		t.failures = append(t.failures, rankedFailure{})
	}
	copy(t.failures[pos+1:], t.failures[pos:]) // drops the last when full
	t.failures[pos] = f
}

// imageStatuses is the per-image part of the status: how many images every
// matching node has, and the first MaxReportedImages, in spec order, that
// some node lacks or that the nodes resolved to different digests. Images
// that are done are only counted, so a settled status stays a few hundred
// bytes whatever the number of images.
func (t *warmTally) imageStatuses() (ready int32, pending []warmv1.ImageFleetStatus) {
	for i := range t.images {
		img := t.images[i]
		img.DigestsDiffer = t.digests[i].split
		lacking := img.Ready < t.nodes.Matching
		if t.nodes.Matching > 0 && !lacking {
			ready++
		}
		if (lacking || img.DigestsDiffer) && len(pending) < warmv1.MaxReportedImages {
			pending = append(pending, img)
		}
	}
	return ready, pending
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
