package pullengine

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Big never blocks small.
//
// A slot frees only when a pull ends, and a pull of a large image on a
// node's link holds its slot for many minutes: with every slot held by
// such pulls, a small image queued after them (a sidecar) would wait that
// long. Two cures were weighed: a slot kept for small images, or pausing
// a large pull for the small one. A kept slot needs the waiting image's
// size before its pull, which the engine learns only from the manifest the
// runtime fetches once the pull starts; and it either leaves one slot idle
// for large images all the time or runs more pulls than the node allows.
// Pausing needs only the sizes of the pulls under way, which the content
// store shows (progress.go), and reuses what shares.go does for fairness:
// the large pull is cancelled with its bytes held in a lease (keep.go),
// queued again after the small one, and goes on from where it was within
// moments of the small one's end.
//
// So when every slot is held by pulls whose images are large (at least
// largeBytes compressed), and a queued pull that is not known to be large
// could start but for a slot, the engine pauses the large pull that has
// fetched least, or those waiting in the runtime (pausesFor), and holds
// them back until the small one's pull ends. A paused pull's successor
// knows its size, so it never pauses another large one; and each image's
// pull is paused at most maxSizePauses times for this, so an image taken
// to be small that turns out large cannot keep the large ones going back
// and forth.

// DefaultLargePullBytes is the compressed size from which an image's pull
// counts as large: it gives its slot to a smaller image's waiting pull.
const DefaultLargePullBytes = 1 << 30

// maxSizePauses is how many times one image's pull is paused to give its
// slot to a smaller image's.
const maxSizePauses = 3

// smallHoldMax is how long the pulls paused for a smaller image wait for
// it at most: it was taken to be small, and may be slow all the same.
const smallHoldMax = 30 * time.Second

// errSize is the cause of a pull stopped to give its slot to a smaller
// image's pull.
var errSize = sizeCause{}

type sizeCause struct{}

func (sizeCause) Error() string {
	return "pull paused to give its slot to a smaller image's pull"
}

// overSizeLocked returns the large pulls to pause and the waiting pull w
// they are paused for, or nils: every slot must be held by a large pull
// and w must not be known to be large; pausesFor chooses which.
func (e *Engine) overSizeLocked() (pause []*job, w *job) {
	if e.slots < 1 || e.large <= 0 || e.holdingLocked() {
		return nil, nil
	}
	held, busy := e.heldLocked()
	if busy < e.slots {
		return nil, nil
	}
	var running []*job
	for _, js := range held {
		for _, j := range js {
			if e.sizeOfLocked(j) < e.large {
				return nil, nil
			}
			running = append(running, j)
		}
	}
	if len(running) < busy { // one is stopping: its slot frees anyway
		return nil, nil
	}
	if w = e.firstSmallLocked(); w == nil {
		return nil, nil
	}
	if pause = pausesFor(running, w); len(pause) == 0 {
		return nil, nil
	}
	return pause, w
}

// pausesFor chooses, among the large pulls running, those to pause for
// waiting pull w, so that w's requests find a download free in the
// runtime with none queued before them.
//
// On containerd 2 the runtime's download limit (max_concurrent_downloads,
// 3 by default) is one queue for the node, first come first served, and
// every blob request of every pull takes its turn in it (the registry
// fetcher's open, in core/remotes/docker/fetcher.go), w's manifest and
// layers too. A blob waiting there has its ingest open already (remotes'
// Fetch opens the writer first), not growing. A freed download goes to the
// first in that queue: were a pull left running with a blob waiting, the
// download a paused pull frees would go to that blob, and w would wait
// until one of the runtime's downloads ended: a whole layer of a large
// image. So every pull with a blob waiting, or not fetching at all, is
// paused; and when none of those was fetching (pausing them frees no
// download), the fetching pull that has fetched least is paused too. On
// containerd 1.6 the limit is each pull's own: a blob waits for it before
// its ingest is opened, so no pull is seen waiting, and only the least
// fetched is paused.
//
// A pull of a higher priority than w's, not started, or paused
// maxSizePauses times already, is never chosen.
func pausesFor(running []*job, w *job) []*job {
	var pause []*job
	var least *job
	frees := false
	for _, j := range running {
		if j.priority > w.priority || j.startedAt.IsZero() || j.sizePauses >= maxSizePauses {
			continue
		}
		if !j.moving || j.waiting {
			pause = append(pause, j)
			frees = frees || j.moving
		} else if least == nil || j.progress.Done < least.progress.Done {
			least = j
		}
	}
	if least != nil && !frees {
		pause = append(pause, least)
	}
	return pause
}

// firstSmallLocked returns the first queued job, in the queue's order,
// that could start were a slot free and whose image is not known to be
// large.
func (e *Engine) firstSmallLocked() *job {
	var w *job
	for _, q := range e.queue {
		if r := e.repos[q.ref.Name()]; r != nil && r.running != nil {
			continue
		}
		if e.sizeOfLocked(q) < e.large && (w == nil || before(q, w)) {
			w = q
		}
	}
	return w
}

// sizeOfLocked is the compressed size known of j's image: what its pull's
// manifest says, or what an earlier pull of it learnt; 0 when unknown.
func (e *Engine) sizeOfLocked(j *job) int64 {
	return max(j.knownSize(), e.needs[j.ref.String()].fetch)
}

// knownSize is the compressed size its pull's manifest says, or what an
// earlier pull learnt; 0 when neither knows.
func (j *job) knownSize() int64 {
	if j.progress != nil && j.progress.Known {
		return j.progress.Total
	}
	return j.size
}

// pauseForSizeLocked marks j paused for w, with a successor queued when
// it ends, after w, and held back until w's pull ends (at most
// smallHoldMax).
func (e *Engine) pauseForSizeLocked(j, w *job) {
	e.seq++
	again := e.successorLocked(j, e.turns.after(j.priority, j.share, w.turn), e.seq)
	again.sizePauses++
	again.heldFor, again.heldSince = w, e.clock.Now()
	e.metrics.sizePauses.Inc()
}

// heldForSmallLocked says whether queued job j waits for the smaller
// image's pull it was paused for: until that ends, or turns out large,
// or smallHoldMax has passed. Were it to start at once, on containerd 2
// its layers would queue for the runtime's downloads ahead of that
// pull's.
func (e *Engine) heldForSmallLocked(j *job) bool {
	w := j.heldFor
	if w == nil {
		return false
	}
	if w.ended || e.jobs[w.ref.String()] != w || e.sizeOfLocked(w) >= e.large || e.clock.Since(j.heldSince) >= smallHoldMax {
		j.heldFor = nil
		return false
	}
	return true
}

// wakeAfter wakes the puller after d, for jobs held until then.
func (e *Engine) wakeAfter(d time.Duration) {
	// In its own goroutine: a fake clock calls it holding a lock.
	e.clock.AfterFunc(d, func() {
		go func() {
			e.mu.Lock()
			e.wake.Broadcast()
			e.mu.Unlock()
		}()
	})
}

// scaledTimeout is the time a pull of an image of size compressed bytes
// has when its timeout is the engine's default: that default for every
// started gigabyte. The default is one figure for every image, and one
// that lets a small image's stuck pull go in good time would cut a large
// image's progressing one; a request's own timeout is taken as said. The
// stall timeout is the guard against a pull that does not progress.
func scaledTimeout(timeout time.Duration, size int64) time.Duration {
	const per = 1 << 30
	n := min((size+per-1)/per, 1024) // 1 TiB: far past any image
	if n <= 1 {
		return timeout
	}
	return timeout * time.Duration(n)
}

// pullDeadline cancels a pull as timed out when its time is up, time
// that grows with its image's size once known (scaledTimeout).
type pullDeadline struct {
	mu      sync.Mutex
	timer   clock.Timer
	stopped bool
}

// deadline starts j's pull timeout. At the end of j.timeout the job's
// known size may give it more: the timer is set again for the rest.
func (e *Engine) deadline(j *job) *pullDeadline {
	d := &pullDeadline{}
	start := e.clock.Now()
	var fire func()
	fire = func() {
		e.mu.Lock()
		limit := j.timeout
		if !j.ownTimeout {
			limit = scaledTimeout(j.timeout, j.knownSize())
		}
		e.mu.Unlock()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.stopped {
			return
		}
		if left := limit - e.clock.Since(start); left > 0 {
			d.timer = e.clock.AfterFunc(left, func() { go fire() })
			return
		}
		e.mu.Lock()
		j.timeout = limit // what the message says it had
		e.mu.Unlock()
		j.cancel(errTimedOut)
	}
	d.mu.Lock()
	// In its own goroutine: a fake clock calls it holding a lock its Now
	// takes.
	d.timer = e.clock.AfterFunc(j.timeout, func() { go fire() })
	d.mu.Unlock()
	return d
}

// Stop stops the timer; the pull is no longer cut.
func (d *pullDeadline) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.timer.Stop()
}
