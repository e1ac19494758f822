package pullengine

import (
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// Once a pull's blobs are all in, its unpack has the node's disk and
// cores to itself and runs faster than it did beside the download (three
// times as fast on the test bed's two cores). The time left while a pull
// downloads needs that faster rate before the pull reaches it, so the
// watcher learns it from the pulls that ran before, per node (each agent
// runs one engine): the average rate over each pull's unpack once its
// download ended, smoothed across pulls. It is kept in memory; an agent
// started again learns it anew, and its estimates fall back to the pull's
// own rates until then.

// unpackReading is one reading of a pull's unpacked bytes.
type unpackReading struct {
	bytes int64
	at    time.Time
}

// minAlone is how long a pull must have unpacked with every blob in for
// its average rate over that stretch to count, for its own estimate and
// for the node to learn from: below it, a reading's lag and the
// snapshot's walk are most of what is measured.
const minAlone = 500 * time.Millisecond

// nodePrior is how many seconds of a pull's own unpack the node's learned
// rate weighs as, in the pull's rate once its download ended: the first
// second of an unpack that has the disk to itself runs faster than the
// rest (the page cache takes the writes until it flushes, and a layer's
// commit pauses it), so the pull's own average alone says too little
// left at first (by 45 % on the test bed's containerd 1.6).
const nodePrior = 2.0

// nodeRateWeight is the share of the latest pull in the node's unpack
// rate: pulls are few, and the newest tells most of the node's load.
const nodeRateWeight = 0.5

// unpackAlone records a reading of the unpacking once every blob is in,
// and takes the pull's unpack rate to be the average since the first such
// reading, with the node's learned rate weighed in as nodePrior seconds
// of it: the smoothed rate carries the slower one read beside the
// download for several readings. Without a learned rate, the average
// counts from minAlone on.
func (t *track) unpackAlone(bytes int64, now time.Time) {
	if t.p.Phase != pull.PhaseUnpacking {
		return
	}
	if t.alone.at.IsZero() {
		t.alone = unpackReading{bytes: bytes, at: now}
	}
	// To the last reading that grew: once every layer is unpacked, the
	// pull's last commit and its image record take a while that no byte
	// is left to share, and the node's rate learned with it would be
	// short of what the next pull unpacks at.
	if bytes > t.last.bytes || t.last.at.IsZero() {
		t.last = unpackReading{bytes: bytes, at: now}
	}
	if node := t.p.NodeUnpackRate; node > 0 {
		d := t.last.at.Sub(t.alone.at).Seconds()
		t.p.UnpackRate = (float64(max(t.last.bytes-t.alone.bytes, 0)) + node*nodePrior) / (d + nodePrior)
	} else if rate, ok := t.aloneRate(minAlone); ok {
		t.p.UnpackRate = rate
	}
}

// aloneRate is the pull's average unpack rate with every blob in, when
// it was read over at least least.
func (t *track) aloneRate(least time.Duration) (float64, bool) {
	d := t.last.at.Sub(t.alone.at)
	if t.alone.at.IsZero() || d < least || t.last.bytes <= t.alone.bytes {
		return 0, false
	}
	return float64(t.last.bytes-t.alone.bytes) / d.Seconds(), true
}

// learn folds what the ended pull of t tells of the node's unpack rate
// into the watcher's.
func (w *watcher) learn(t *track) {
	rate, ok := t.aloneRate(minAlone)
	if !ok {
		return
	}
	if w.unpackRate == 0 {
		w.unpackRate = rate
		return
	}
	w.unpackRate = (1-nodeRateWeight)*w.unpackRate + nodeRateWeight*rate
}
