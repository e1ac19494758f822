package pullengine

import (
	"container/heap"
	"context"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// The kubelet pulls a starting Pod's image through the same runtime, over
// the same link and onto the same disk as the engine's warm pulls. CRI
// does not say it is pulling; the content store does: blobs being written
// that none of the engine's pulls is fetching are someone else's. While
// there are such, the engine yields: it starts no new pull, and with
// YieldPause it also pauses the pulls it has under way: it cancels them
// and queues them again, and containerd resumes each blob from the bytes
// it had written (its ingest outlives the cancelled pull).
//
// Yielding must not starve warming on a node where Pods start all the
// time: a pull is paused at most maxPauses times, then goes on beside the
// runtime's other pulls; and yielding that has lasted yieldHoldMax no
// longer holds pulls back, until it ends.

// YieldMode is what the engine does while the runtime pulls for someone
// else.
type YieldMode string

// Yield modes.
const (
	// YieldOff: the engine pulls as if alone.
	YieldOff YieldMode = "off"
	// YieldWait: no new pull starts; the pulls under way go on.
	YieldWait YieldMode = "wait"
	// YieldPause: no new pull starts, and the pulls under way are
	// paused: stopped and queued again, to start once the runtime's other
	// pulls end, resuming from the bytes they had fetched.
	YieldPause YieldMode = "pause"
	// YieldRequeue is YieldPause's former name, still accepted.
	YieldRequeue YieldMode = "requeue"
)

// pauses says whether the mode pauses the pulls under way.
func (m YieldMode) pauses() bool { return m == YieldPause || m == YieldRequeue }

// maxPauses is how many times one image's pull is paused; after that it
// goes on beside the runtime's other pulls, as in YieldWait, so a node
// where Pods start all the time still finishes its warm pulls.
const maxPauses = 3

// yieldHoldMax is how long yielding holds pulls back: past it, pulls
// start again beside the runtime's other pulls until yielding ends (a
// node pulling for its Pods without a pause must still warm). It is far
// longer than a Pod's pull of an ordinary image on a node's link.
const yieldHoldMax = 5 * time.Minute

// YieldListener is a Listener that also hears when the engine starts and
// stops yielding. Optional: the engine calls it only when its Listener
// implements it.
type YieldListener interface {
	Yielding(on bool)
}

// Yield is whether the engine is yielding (pull.Yield).
type Yield = pull.Yield

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

// mine is the set of blobs the engine's pulls fetch, or fetched until
// lately: what their manifests name.
func (w *watcher) mine() map[string]bool {
	out := map[string]bool{}
	add := func(t *track) {
		out[t.manifest] = true
		for _, b := range t.blobs {
			out[b.digest] = true
		}
	}
	for _, t := range w.tracks {
		add(t)
	}
	for t := range w.ended {
		add(t)
	}
	return out
}

// foreign returns the blobs being written, lately, for pulls other than
// the engine's: large, and not among mine.
func foreign(ingests []content.Ingest, mine map[string]bool, now time.Time) map[string]bool {
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
// reading and of the last, and the others' pulls under way (others.go).
// It starts once a blob is seen in both, or in this one alone when sure
// (every pull of the engine's has its manifest found: one whose manifest
// is not found yet writes blobs it cannot tell from others' for a
// moment), or with others' pulls, and lasts while any blob or pull is
// seen.
func (e *Engine) yieldTo(ctx context.Context, now, last map[string]bool, sure bool, pulls int, at time.Time) {
	n := 0
	for d := range now {
		if last[d] || sure {
			n++
		}
	}
	e.mu.Lock()
	on := e.yieldMode != YieldOff && (n > 0 || pulls > 0 || (e.yield.On && len(now) > 0))
	// A pull seen by its lease alone is at least one blob to come.
	n = max(n, len(now), pulls)
	changed, paused := e.setYieldLocked(on, n, at)
	e.mu.Unlock()
	e.pause(ctx, paused)
	if changed {
		e.yieldChanged(on, n, len(paused))
	}
}

// setYieldLocked turns yielding on or off (to blobs, since at); as it
// starts in a pausing mode it marks the running pulls paused, for the
// caller to stop outside the lock (pause). Once it has lasted
// yieldHoldMax it holds pulls back no longer (holdingLocked). It says
// whether it changed, and returns the pulls to pause.
func (e *Engine) setYieldLocked(on bool, blobs int, at time.Time) (changed bool, paused []*job) {
	was := e.yield.On
	switch {
	case on && !was:
		e.yield = Yield{On: true, Since: at, Blobs: blobs}
		if e.yieldMode.pauses() {
			paused = e.pauseRunningLocked()
		}
	case on:
		e.yield.Blobs = blobs
		if !e.yieldSpent && at.Sub(e.yield.Since) >= yieldHoldMax {
			e.yieldSpent = true
			e.wake.Broadcast()
			e.log.Info("Yielding for long; pulls start again beside the runtime's others", "since", e.yield.Since)
		}
	case was:
		e.yield, e.yieldSpent = Yield{}, false
		e.wake.Broadcast()
	}
	return on != was, paused
}

// holdingLocked says whether yielding holds pulls back: it is on, and has
// not lasted yieldHoldMax.
func (e *Engine) holdingLocked() bool { return e.yield.On && !e.yieldSpent }

// yieldChanged tells the metrics, the log and the listener that yielding
// started or ended.
func (e *Engine) yieldChanged(on bool, blobs, paused int) {
	e.metrics.yielding.Set(boolGauge(on))
	if on {
		e.metrics.yields.Inc()
		e.logger().Info("Yielding to a pull the runtime makes for someone else", "blobs", blobs, "mode", string(e.yieldMode), "paused", paused)
	} else {
		e.logger().Info("No longer yielding")
	}
	if yl, ok := e.listener.(YieldListener); ok {
		yl.Yielding(on)
	}
}

// yieldFirst looks, before a pull starts, for the runtime's pulls for
// others: the watcher reads the store only while the engine has pulls, so
// the first pull of a warm would otherwise start beside the kubelet's.
// When there are such, the engine yields at once and the job goes back to
// the queue; it says so. It does not look while a pull of the engine's has
// no manifest found (its blobs could be taken for another's).
func (e *Engine) yieldFirst(ctx context.Context, j *job) bool {
	if e.yieldMode == YieldOff || e.content == nil {
		return false
	}
	e.mu.Lock()
	mine, sure, spent := e.mine, !e.resolvingLocked(j), e.yieldSpent
	e.mu.Unlock()
	if !sure || spent {
		return false
	}
	ingests, err := e.content.Ingests(ctx)
	if err != nil {
		return false
	}
	now := e.clock.Now()
	n := max(len(foreign(ingests, mine, now)), e.othersPulls(ctx, now, time.Time{}))
	if n == 0 {
		return false
	}
	e.mu.Lock()
	if e.yieldSpent { // yielding became spent meanwhile
		e.mu.Unlock()
		return false
	}
	e.handBackLocked(j)
	changed, paused := e.setYieldLocked(true, n, now)
	e.mu.Unlock()
	e.pause(ctx, paused)
	if changed {
		e.yieldChanged(true, n, len(paused))
	}
	return true
}

// resolvingLocked says whether a running pull other than skip has no
// manifest found yet.
func (e *Engine) resolvingLocked(skip *job) bool {
	for _, j := range e.jobs {
		if j != skip && j.running && (j.progress == nil || !j.progress.Known) {
			return true
		}
	}
	return false
}

// handBackLocked puts a job popped to run back in the queue, unstarted.
func (e *Engine) handBackLocked(j *job) {
	e.freeRepoLocked(e.repos[j.ref.Name()])
	j.running = false
	heap.Push(&e.queue, j)
	e.metrics.pullsQueued.Inc()
}

// pauseRunningLocked marks the running pulls not paused maxPauses times
// already as paused, each with a successor queued when it ends, and
// returns them for pause to stop.
func (e *Engine) pauseRunningLocked() []*job {
	var out []*job
	for _, j := range e.jobs {
		if !j.running || j.notWanted || j.ended || j.pauses >= maxPauses {
			continue
		}
		e.successorLocked(j, j.turn, j.seq).pauses++
		e.metrics.pauses.Inc()
		out = append(out, j)
	}
	return out
}

// successorLocked marks running job j paused, with a successor queued
// when it ends, at turn and seq, that carries on its pause counts; it
// returns the successor.
func (e *Engine) successorLocked(j *job, turn, seq uint64) *job {
	again := &job{ref: j.ref, priority: j.priority, timeout: j.timeout, creds: j.creds, backoffKey: j.backoffKey,
		tag: j.tag, share: j.share, turn: turn, seq: seq, index: -1, pauses: j.pauses, sharePauses: j.sharePauses,
		sizePauses: j.sizePauses, size: j.knownSize(), ownTimeout: j.ownTimeout}
	j.notWanted, j.successor = true, again
	return again
}

// pause stops the pulls marked paused to yield (stop).
func (e *Engine) pause(ctx context.Context, jobs []*job) { e.stop(ctx, jobs, errYield) }

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
