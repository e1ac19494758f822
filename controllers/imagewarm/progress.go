package imagewarm

import (
	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// fleetProgress sums one ImageWarm's pulls under way over its nodes: the
// bytes of its images each node's agent reports (NodeImage.progress), and
// the node that will take longest. Its size does not grow with the nodes.
type fleetProgress struct {
	sum warmv1.FleetPullProgress
	// slowestBytesLeft is the slowest node's bytes to go, which decide
	// while no node has a time left.
	slowestBytesLeft int64
}

// add counts one node's entries of the ImageWarm's images (one per
// image, however often the spec names it).
func (f *fleetProgress) add(node string, entries []*warmv1.NodeImage) {
	var done, total int64
	var left *int64
	var phase warmv1.PullPhase
	seen := false
	for _, e := range entries {
		if e == nil || e.Progress == nil || e.State != warmv1.ImagePulling {
			continue
		}
		seen = true
		done += e.Progress.BytesDone
		total += e.Progress.BytesTotal
		if l := e.Progress.SecondsLeft; l != nil && (left == nil || *l > *left) {
			left = l
		}
		if p := warmv1.PhaseOf(e.Progress); p == warmv1.PullPhaseDownloading || phase == "" {
			phase = p
		}
	}
	if !seen {
		return
	}
	f.sum.Nodes++
	f.sum.BytesDone += done
	f.sum.BytesTotal += total
	if f.slower(left, total-done) {
		f.sum.SlowestNode, f.slowestBytesLeft, f.sum.SlowestPhase = node, total-done, phase
		f.sum.SlowestSecondsLeft = nil
		if left != nil {
			v := *left
			f.sum.SlowestSecondsLeft = &v
		}
	}
}

// slower says whether a node with left seconds (nil: unknown) and
// bytesLeft to go comes after the slowest so far: a known time beats an
// unknown one, the longer time the shorter, and between unknown times the
// more bytes.
func (f *fleetProgress) slower(left *int64, bytesLeft int64) bool {
	cur := f.sum.SlowestSecondsLeft
	switch {
	case f.sum.SlowestNode == "":
		return true
	case left != nil && cur != nil:
		return *left > *cur
	case left != nil || cur != nil:
		return left != nil
	}
	return bytesLeft > f.slowestBytesLeft
}

// status is the sum, nil when no node had a pull to count.
func (f *fleetProgress) status() *warmv1.FleetPullProgress {
	if f.sum.Nodes == 0 {
		return nil
	}
	out := f.sum
	// The API's bound: a sum beyond it would have the status refused.
	out.BytesDone, out.BytesTotal = min(out.BytesDone, maxFleetBytes), min(out.BytesTotal, maxFleetBytes)
	return &out
}

// maxFleetBytes is the API's bound of FleetPullProgress's byte counts.
const maxFleetBytes = 999_999_999_999_999_999

// maxFleetServed is the API's bound of ImageWarmStatus.servedStarts.
const maxFleetServed = 999_999_999_999
