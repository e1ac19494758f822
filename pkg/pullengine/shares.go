package pullengine

import (
	"context"
	"errors"
	"time"
)

// Shares hold slots fairly.
//
// Turns (turns.go) choose which queued pull starts when a slot frees, but
// a slot frees only when a pull ends: a registry that trickles a byte just
// often enough to beat the stall detector ends its pulls at their timeout
// only. A share that named as many such images as there are slots would
// hold every slot that long, and every other share would wait. So while a
// pull of another share waits at the same or a higher priority, no share
// holds more than its fair number of slots: the slots divided among the
// shares that have work, running or queued, at least one each. When the
// first waiting pull of a share that holds fewer than that could start
// but for a slot, and another share holds more, the engine pauses that
// share's most recently started pull (the least fetched, likely) as
// yielding does (yield.go): cancelled, its bytes kept (keep.go), queued
// again at its share's next turn, after the waiting pull. The slot it
// frees goes to the waiting pull within moments. And as a slot frees, a
// share below its fair number starts before one at it (owedLocked), so
// the paused pull does not take its slot back while that share still
// has pulls waiting.
//
// With more shares than slots (always so with serial pulls) each holder
// has its fair one slot, and a share with none takes the slot of another
// share's longest pull only once that has run shareRunMin: a pull paused
// costs a new request to the registry, and bytes not kept where the
// runtime shows none (CRI-O), so the ordinary pull is left to end, and
// only a long one gives its slot up in turn.
//
// Churn is bounded as yielding's is: a pull is paused at most
// maxSharePauses times for this, then goes on whoever waits, so an image
// too slow to pull between pauses still ends (its timeout bounds it).
// With one share, or slots uncapped, nothing changes.

// maxSharePauses is how many times one image's pull is paused to give
// its slot to another share; it is counted apart from yielding's pauses.
const maxSharePauses = 3

// shareRunMin is how long a pull holding its share's one slot runs before
// it gives the slot to a share with none: an ordinary image on a node's
// link is in well within it, and a waiting share waits about this long
// per turn, not a stuck pull's whole timeout (DefaultPullTimeout).
const shareRunMin = time.Minute

// errShare is the cause of a pull stopped to give its slot to another
// share.
var errShare = shareCause{}

type shareCause struct{}

func (shareCause) Error() string {
	return "pull paused to give its slot to another share's pull"
}

// shareSlots pauses a pull that holds a slot another share is owed, if
// there is one, one pull a call: each freed slot starts one waiting pull,
// and the next pull to start calls again. When the only pull to pause has
// not run shareRunMin yet, it calls again then.
func (e *Engine) shareSlots() {
	if e.slots < 1 {
		return
	}
	e.mu.Lock()
	if e.ctx == nil || e.stopped {
		e.mu.Unlock()
		return
	}
	cause, now := error(errShare), e.clock.Now()
	j, w, wait := e.overShareLocked(now)
	paused := []*job{j}
	if j == nil {
		if paused, w = e.overSizeLocked(); len(paused) > 0 {
			cause, j = errSize, paused[0]
			for _, p := range paused {
				e.pauseForSizeLocked(p, w)
			}
			e.wakeAfter(smallHoldMax)
		}
	} else {
		e.pauseForShareLocked(j, w)
	}
	if j == nil && wait > 0 && e.shareTimer == nil {
		// In its own goroutine: a clock may call it holding a lock that
		// its Now takes (the fake clock's Step does).
		e.shareTimer = e.clock.AfterFunc(wait, func() { go e.shareSlotsAgain() })
	}
	ctx := e.ctx
	e.mu.Unlock()
	if j == nil {
		return
	}
	if errors.Is(cause, errSize) {
		for _, p := range paused {
			e.logger().Info("Pull of a large image paused to give its slot to a smaller image's", "image", p.ref.Original(), "for", w.ref.Original())
		}
	} else {
		e.logger().Info("Pull paused to give its slot to another share's", "image", j.ref.Original(), "share", j.share, "for", w.share)
	}
	e.stop(ctx, paused, cause)
}

// shareSlotsAgain is shareSlots when its timer fires.
func (e *Engine) shareSlotsAgain() {
	e.mu.Lock()
	e.shareTimer = nil
	e.mu.Unlock()
	e.shareSlots()
}

// overShareLocked returns the pull to pause and the waiting pull w it is
// paused for: w is the first waiting pull, in the queue's order, of a
// share holding fewer than its fair number of slots. Or it returns how
// long until the one to pause has run shareRunMin.
func (e *Engine) overShareLocked(now time.Time) (pause, w *job, wait time.Duration) {
	if e.holdingLocked() { // a freed slot would start nothing
		return nil, nil, 0
	}
	held, busy := e.heldLocked()
	if busy < e.slots { // a slot is free: the waiting pull starts anyway
		return nil, nil, 0
	}
	first := e.firstWaitingLocked()
	shares := len(held)
	for s := range first {
		if _, ok := held[s]; !ok {
			shares++
		}
	}
	if shares < 2 {
		return nil, nil, 0
	}
	fair := max(1, e.slots/shares)
	for _, q := range first {
		if len(held[q.share]) < fair && (w == nil || before(q, w)) {
			w = q
		}
	}
	if w == nil {
		return nil, nil, 0
	}
	pause, wait = pauseFor(w, held, fair, now)
	if pause == nil {
		return nil, nil, wait
	}
	return pause, w, 0
}

// pauseFor chooses among the pulls held, by share, the one to pause for
// waiting pull w: the most recently started of a share above fair;
// with none above, when w's share holds no slot, the longest under way,
// once it has run shareRunMin (else how long until then). It never picks
// w's share's, one of a higher priority than w's, one whose pull has not
// started, or one paused maxSharePauses times already.
func pauseFor(w *job, held map[string][]*job, fair int, now time.Time) (*job, time.Duration) {
	var newest, longest *job
	above := false
	for s, js := range held {
		if s == w.share {
			continue
		}
		above = above || len(js) > fair
		for _, j := range js {
			if j.priority > w.priority || j.startedAt.IsZero() || j.sharePauses >= maxSharePauses {
				continue
			}
			if len(js) > fair && (newest == nil || j.startedAt.After(newest.startedAt)) {
				newest = j
			}
			if longest == nil || j.startedAt.Before(longest.startedAt) {
				longest = j
			}
		}
	}
	switch {
	case newest != nil:
		return newest, 0
	case above || longest == nil || len(held[w.share]) > 0:
		return nil, 0
	case now.Sub(longest.startedAt) < shareRunMin:
		return nil, shareRunMin - now.Sub(longest.startedAt)
	}
	return longest, 0
}

// owedLocked returns, for job j about to start, the first waiting job of
// another share owed the slot first: one at j's priority or higher whose
// share holds fewer than its fair number of slots, while j's holds its
// own already. A pull paused for a share must not take back the slot it
// gave when that share's pull ends and its next waits; nil when none.
func (e *Engine) owedLocked(j *job) *job {
	if e.slots < 1 {
		return nil
	}
	held, _ := e.heldLocked()
	first := e.firstWaitingLocked()
	shares := map[string]bool{j.share: true}
	for s := range held {
		shares[s] = true
	}
	for s := range first {
		shares[s] = true
	}
	fair := max(1, e.slots/len(shares))
	if len(held[j.share]) < fair {
		return nil
	}
	var w *job
	for s, q := range first {
		if s != j.share && q.priority >= j.priority && len(held[s]) < fair && (w == nil || before(q, w)) {
			w = q
		}
	}
	return w
}

// heldLocked returns, by share, the pulls holding a slot that are not
// stopping, and how many slots are taken, stopping pulls included.
func (e *Engine) heldLocked() (map[string][]*job, int) {
	held := map[string][]*job{}
	busy := 0
	for _, j := range e.jobs {
		if !j.running {
			continue
		}
		busy++
		if !j.notWanted && !j.ended {
			held[j.share] = append(held[j.share], j)
		}
	}
	return held, busy
}

// firstWaitingLocked returns each share's first queued job that could
// start were a slot free (its repository has no pull under way).
func (e *Engine) firstWaitingLocked() map[string]*job {
	first := map[string]*job{}
	for _, q := range e.queue {
		if r := e.repos[q.ref.Name()]; r != nil && r.running != nil {
			continue
		}
		if f := first[q.share]; f == nil || before(q, f) {
			first[q.share] = q
		}
	}
	return first
}

// pauseForShareLocked marks j paused, with a successor queued when it
// ends at its share's next turn, and not before w's: were it ahead of w
// it would take the freed slot back. Its sequence is new, so that at an
// equal turn it comes after the pulls already queued.
func (e *Engine) pauseForShareLocked(j, w *job) {
	e.seq++
	again := e.successorLocked(j, e.turns.after(j.priority, j.share, w.turn), e.seq)
	again.sharePauses++
	e.metrics.sharePauses.Inc()
}

// stop cancels the pulls marked paused with cause, once their partial
// blobs are held for their successors (keep.go).
func (e *Engine) stop(ctx context.Context, jobs []*job, cause error) {
	if len(jobs) == 0 {
		return
	}
	e.keep(ctx, jobs)
	for _, j := range jobs {
		j.cancel(cause)
	}
}
