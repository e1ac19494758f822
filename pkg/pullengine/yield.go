package pullengine

import (
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
)

// The kubelet pulls a starting Pod's image through the same runtime, over
// the same link and onto the same disk as the engine's warm pulls. CRI
// does not say it is pulling; the content store does: blobs being written
// that none of the engine's pulls is fetching are someone else's. While
// there are such, the engine yields: it starts no new pull, and with
// YieldRequeue it also stops the pulls it has under way and queues them
// again (containerd resumes a blob it had partly written).

// YieldMode is what the engine does while the runtime pulls for someone
// else.
type YieldMode string

// Yield modes.
const (
	// YieldOff: the engine pulls as if alone.
	YieldOff YieldMode = "off"
	// YieldWait: no new pull starts; the pulls under way go on.
	YieldWait YieldMode = "wait"
	// YieldRequeue: no new pull starts, and the pulls under way are
	// stopped and queued again, to start once the runtime's other pulls
	// end.
	YieldRequeue YieldMode = "requeue"
)

// YieldListener is a Listener that also hears when the engine starts and
// stops yielding. Optional: the engine calls it only when its Listener
// implements it.
type YieldListener interface {
	Yielding(on bool)
}

// Yield is whether the engine is yielding, since when, and to how many
// blobs being written for someone else.
type Yield struct {
	On    bool
	Since time.Time
	Blobs int
}

// foreignFresh is how recently a blob must have been written to count as
// being pulled; stale ingests (a cancelled pull's partial blob) linger.
const foreignFresh = 3 * time.Second

// foreignMin is the least size of a blob that counts: manifests and
// configs are small, and a pull of small layers ends before yielding
// would help it.
const foreignMin = 1 << 20

// errYield is the cause of a pull stopped to yield.
var errYield = yieldCause{}

type yieldCause struct{}

func (yieldCause) Error() string {
	return "pull paused to yield to a pull the runtime makes for someone else"
}

// Yielding reports whether the engine yields now.
func (e *Engine) Yielding() Yield {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.yield
}

// foreign returns the blobs being written, lately, for pulls other than
// the engine's: not named by any manifest the engine's pulls fetch.
func foreign(ingests []content.Ingest, tracks map[*job]*track, now time.Time) map[string]bool {
	mine := map[string]bool{}
	for _, t := range tracks {
		mine[t.manifest] = true
		for _, b := range t.blobs {
			mine[b.digest] = true
		}
	}
	out := map[string]bool{}
	for _, in := range ingests {
		if in.Digest == "" || mine[in.Digest] || now.Sub(in.UpdatedAt) > foreignFresh || max(in.Total, in.Offset) < foreignMin {
			continue
		}
		out[in.Digest] = true
	}
	return out
}

// yieldTo updates the engine's yielding from the foreign blobs of this
// reading and of the last (a blob counts once seen in both: a pull of the
// engine's whose manifest is not found yet writes blobs it cannot tell
// from others' for a moment).
func (e *Engine) yieldTo(now, last map[string]bool, at time.Time) {
	n := 0
	for d := range now {
		if last[d] {
			n++
		}
	}
	on := e.yieldMode != YieldOff && n > 0
	e.mu.Lock()
	was := e.yield.On
	switch {
	case on && !was:
		e.yield = Yield{On: true, Since: at, Blobs: n}
	case on:
		e.yield.Blobs = n
	case was:
		e.yield = Yield{}
		e.wake.Broadcast()
	}
	var stop []*job
	if on && !was && e.yieldMode == YieldRequeue {
		stop = e.requeueRunningLocked()
	}
	e.mu.Unlock()
	if on == was {
		return
	}
	e.metrics.yielding.Set(boolGauge(on))
	if on {
		e.metrics.yields.Inc()
		e.logger().Info("Yielding to a pull the runtime makes for someone else", "blobs", n, "mode", string(e.yieldMode), "stopped", len(stop))
	} else {
		e.logger().Info("No longer yielding")
	}
	if yl, ok := e.listener.(YieldListener); ok {
		yl.Yielding(on)
	}
}

// requeueRunningLocked stops the running pulls and queues each again, to
// start when yielding ends.
func (e *Engine) requeueRunningLocked() []*job {
	var out []*job
	for _, j := range e.jobs {
		if !j.running || j.notWanted || j.ended {
			continue
		}
		again := &job{ref: j.ref, priority: j.priority, timeout: j.timeout, creds: j.creds, backoffKey: j.backoffKey,
			tag: j.tag, seq: j.seq, index: -1}
		j.notWanted, j.successor = true, again
		j.cancel(errYield)
		out = append(out, j)
	}
	return out
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
