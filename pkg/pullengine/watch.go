package pullengine

import (
	"context"
	"slices"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// watch reads the runtime's content store every watchEvery while pulls
// run, until ctx ends: each running pull's progress is updated, the
// metrics of bytes fetched and throughput follow, and a pull whose bytes
// stopped moving for the stall timeout is cancelled as Stalled. With
// nothing to watch it sleeps until a job is queued.
func (e *Engine) watch(ctx context.Context) {
	timer := e.clock.NewTimer(e.watchEvery)
	defer timer.Stop()
	w := &watcher{tracks: map[*job]*track{}, ended: map[*track]time.Time{}}
	due := e.clock.Now().Add(e.watchEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		if now := e.clock.Now(); now.Before(due) {
			// Between readings: a look for others' pulls (others.go).
			e.lookForPulls(ctx, w)
			timer.Reset(e.nextLook(due.Sub(now)))
			continue
		}
		poll, idle := e.watchOnce(ctx, w)
		if idle {
			// Nothing to watch: sleep until a job is queued, so an
			// agent at rest is not woken every second. Its pull may
			// start at once, and unpack as fast (unpack.go).
			select {
			case <-ctx.Done():
				return
			case <-e.busy:
			}
			poll = unpackPoll
		}
		next := e.watchEvery
		if poll > 0 {
			next = min(next, poll)
		}
		due = e.clock.Now().Add(next)
		timer.Reset(e.nextLook(next))
	}
}

// nextLook is when the watcher wakes next, given the time to its next
// reading: sooner, to look for others' pulls, while it does.
func (e *Engine) nextLook(toReading time.Duration) time.Duration {
	if e.looksForPulls() {
		return min(toReading, pullLook)
	}
	return toReading
}

// resolvingPoll is how often the store is read while a pull that started
// lately has no manifest found yet: its size decides whether it may go on
// (fit.go), and every second of a fast link is a lot of bytes; and how
// often the disk is read while a pull unpacks (unpack.go).
const resolvingPoll = 200 * time.Millisecond

// resolvingFor is how long after its start a pull counts as lately
// started.
const resolvingFor = 10 * time.Second

// watcher is what the watch goroutine keeps between readings: the tracks
// of running pulls, and the blobs it last found written for others.
type watcher struct {
	tracks  map[*job]*track
	foreign map[string]bool
	// foreignAt is when blobs written for others were last seen.
	foreignAt time.Time
	// ended are the tracks of pulls that ended lately, by when: a
	// cancelled pull's blob stays fresh for a moment, and is no one
	// else's.
	ended map[*track]time.Time
	// disk is the last fresh reading of the disk while pulls ran
	// (unpack.go).
	disk disk
	// unpackRate is the node's unpack rate with nothing downloading,
	// learned from the pulls that ended (rates.go); 0 until one told.
	unpackRate float64
}

// watchOnce takes one reading of every running pull, and closes the
// tracks of pulls that ended since the last; while pulls wait, it also
// looks for the runtime's pulls for others (yield.go). It says how soon
// to read again (0: at the usual pace): soon while a pull that started
// lately still has no manifest found, sooner while one writes what no
// reservation covers (unpack.go); and whether there was nothing to watch
// (no pull, none queued, not yielding, no track left to close).
func (e *Engine) watchOnce(ctx context.Context, w *watcher) (poll time.Duration, idle bool) {
	tracks := w.tracks
	jobs := e.pulling()
	now := e.clock.Now()
	e.closeTracks(w, jobs, now)
	if len(jobs) == 0 && !e.waiting() {
		w.disk = disk{}
		e.metrics.throughput.Set(0)
		e.yieldTo(ctx, nil, nil, false, 0, now)
		w.foreign = nil
		return 0, len(w.ended) == 0
	}
	ingests, err := e.content.Ingests(ctx)
	if err == nil {
		f := foreign(ingests, w.mine(), now)
		if len(f) > 0 {
			w.foreignAt = now
		}
		e.yieldTo(ctx, f, w.foreign, w.resolved(jobs), e.othersPulls(ctx, now, w.foreignAt), now)
		w.foreign = f
	}
	var rate float64
	resolving, learnt := false, false
	for _, j := range jobs {
		t := tracks[j]
		if t == nil {
			t = newTrack(j.ref, j.startedAt)
			tracks[j] = t
		}
		if err == nil {
			known := t.p.Known
			if err = t.update(ctx, e.content, ingests, now); err == nil && !known && t.p.Known {
				e.checkFit(ctx, j, t)
				learnt = true
			}
			if err == nil {
				e.readUnpack(ctx, t, now)
			}
		}
		if err != nil {
			// Unknown is not stalled: the stall clock starts again.
			t.p.MovedAt = now
		}
		rate += t.p.Rate
		t.p.NodeUnpackRate = w.unpackRate
		p := t.p
		e.mu.Lock()
		j.progress, j.moving, j.waiting = &p, t.moving, t.waiting
		fetched := e.newlyFetchedLocked(j, p.Fetched)
		e.mu.Unlock()
		e.metrics.fetchedBytes.Add(float64(fetched))
		if e.stalled(p, now) {
			j.cancel(stalled{after: e.stall, progress: p})
		}
		resolving = resolving || (!p.Known && now.Sub(j.startedAt) < resolvingFor)
	}
	e.metrics.throughput.Set(rate)
	if learnt {
		// A pull's size is known now: large ones may hold every slot
		// while a smaller image waits, or the small one held pulls back
		// for turn out large (sizes.go).
		e.mu.Lock()
		e.wake.Broadcast()
		e.mu.Unlock()
		e.shareSlots()
	}
	if resolving {
		poll = resolvingPoll
	}
	if e.checkUnpack(ctx, w, jobs) {
		poll = unpackPoll
	}
	mine := w.mine()
	e.mu.Lock()
	e.mine = mine
	e.mu.Unlock()
	if err != nil {
		e.logger().V(1).Info("Reading the runtime's content store failed; pull progress not updated", "error", err.Error())
	}
	return poll, false
}

// closeTracks drops the tracks of pulls no longer running (what they
// fetched last is counted as they finish).
func (e *Engine) closeTracks(w *watcher, running []*job, now time.Time) {
	for t, at := range w.ended {
		if now.Sub(at) > foreignFresh {
			delete(w.ended, t)
		}
	}
	for j, t := range w.tracks {
		if slices.Contains(running, j) {
			continue
		}
		w.ended[t] = now
		w.learn(t)
		delete(w.tracks, j)
	}
}

// resolved says whether every running pull's manifest was found.
func (w *watcher) resolved(running []*job) bool {
	for _, j := range running {
		if t := w.tracks[j]; t == nil || !t.p.Known {
			return false
		}
	}
	return true
}

// waiting says whether pulls are queued, or the engine yields.
func (e *Engine) waiting() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue) > 0 || e.yield.On
}

// pulling returns the jobs whose pull has started and not ended.
func (e *Engine) pulling() []*job {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*job
	for _, j := range e.jobs {
		if j.running && !j.startedAt.IsZero() && !j.notWanted && !j.ended {
			out = append(out, j)
		}
	}
	return out
}

// stalled says whether a pull's bytes have not moved for the stall
// timeout; or, with every byte in, whether its unpacking has not (no
// snapshot grew, no layer was committed) where the runtime shows it. A
// pull whose manifest is not found yet does not stall (what it fetches is
// unknown), nor one unpacking unseen.
func (e *Engine) stalled(p pull.Progress, now time.Time) bool {
	if e.stall <= 0 || !p.Known {
		return false
	}
	if p.Done < p.Total {
		return now.Sub(p.MovedAt) >= e.stall
	}
	return p.UnpackSeen && p.Phase == pull.PhaseUnpacking && now.Sub(p.UnpackMovedAt) >= e.stall
}

// lastLook reads the content store once for a pull that succeeded before
// the watcher found what it fetched (a small image on a fast link ends
// within a reading's interval): the blobs its manifest names that were
// committed since it started are what it fetched.
func (e *Engine) lastLook(ctx context.Context, j *job, res Result, start time.Time) {
	if e.content == nil || !res.Succeeded() {
		return
	}
	e.mu.Lock()
	seen := j.progress != nil && j.progress.Known
	e.mu.Unlock()
	if seen {
		return
	}
	t := newTrack(j.ref, start)
	if err := t.update(ctx, e.content, nil, e.clock.Now()); err != nil || !t.p.Known {
		return
	}
	p := t.p
	e.mu.Lock()
	if j.progress == nil || !j.progress.Known { // else the watcher found it meanwhile
		j.progress = &p
	}
	e.mu.Unlock()
}

// newlyFetchedLocked notes fetched as the job's count and returns what it
// adds.
func (e *Engine) newlyFetchedLocked(j *job, fetched int64) int64 {
	d := fetched - j.counted
	if d <= 0 {
		return 0
	}
	j.counted = fetched
	return d
}
