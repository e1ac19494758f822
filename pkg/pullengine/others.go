package pullengine

import (
	"context"
	"time"
)

// The content store shows another client's pull only once it writes a
// layer, and on containerd 2.x that can come late: its CRI plugin
// downloads at most three blobs at a time across all pulls, so the
// kubelet's pull beside three warm pulls waits, writing nothing, until
// one of theirs ends (on the real node of the test bed, 0.7 s of a 3.2 s
// pull). And a pull goes on after its last blob is written: it unpacks.
// containerd opens a lease as a pull starts and ends it once the image is
// unpacked, so the engine also yields while another client's pull holds a
// lease (OthersPulls), and between its readings of the store, while its
// pulls run, it looks for such leases every pullLook.

// OthersPulls is a ContentView that also shows the runtime's pulls for
// other clients from their start to their end (*criclient.ContentStore
// does, by containerd's leases).
type OthersPulls interface {
	// OthersPulls returns when each pull under way for another client
	// started.
	OthersPulls(ctx context.Context) ([]time.Time, error)
}

// pullLook is how often the engine looks for others' pulls between its
// readings of the store, while its pulls run and it does not yield.
const pullLook = 200 * time.Millisecond

// pullSettle is how old another client's lease must be to count as a
// pull: a container's creation holds a lease like a pull's for a few
// milliseconds.
const pullSettle = 100 * time.Millisecond

// pullLeaseFor is how long another client's lease counts as a pull on its
// own: one left behind by a client that stopped must not hold the warm
// back for long. Past it, it counts only while that pull's blobs were
// seen lately (foreignLate), for its unpacking.
const pullLeaseFor = time.Minute

// foreignLate is how recently another client's blobs must have been seen
// being written for its lease of any age to keep yielding on.
const foreignLate = time.Minute

// othersPulls counts the pulls under way for other clients, by the
// runtime's leases: those at least pullSettle old, and younger than
// pullLeaseFor unless others' blobs were being written since
// foreignLate ago (foreignAt). Without the view, or on an error, none.
func (e *Engine) othersPulls(ctx context.Context, now, foreignAt time.Time) int {
	view, ok := e.content.(OthersPulls)
	if !ok || e.yieldMode == YieldOff {
		return 0
	}
	started, err := view.OthersPulls(ctx)
	if err != nil {
		e.logger().V(1).Info("Listing the runtime's pulls failed", "error", err.Error())
		return 0
	}
	late := !foreignAt.IsZero() && now.Sub(foreignAt) < foreignLate
	n := 0
	for _, at := range started {
		age := now.Sub(at)
		if age >= pullSettle && (age < pullLeaseFor || late) {
			n++
		}
	}
	return n
}

// looksForPulls says whether the watcher looks for others' pulls between
// its readings: the view shows them, and pulls of the engine's run while
// it does not yield.
func (e *Engine) looksForPulls() bool {
	if _, ok := e.content.(OthersPulls); !ok || e.yieldMode == YieldOff {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.yield.On {
		return false
	}
	for _, j := range e.jobs {
		if j.running && !j.ended {
			return true
		}
	}
	return false
}

// lookForPulls starts yielding when another client's pull is under way.
func (e *Engine) lookForPulls(ctx context.Context, w *watcher) {
	now := e.clock.Now()
	if n := e.othersPulls(ctx, now, w.foreignAt); n > 0 {
		e.startYield(ctx, n, now)
	}
}

// startYield turns yielding on (to blobs, at now), pausing the pulls
// under way in a pausing mode.
func (e *Engine) startYield(ctx context.Context, blobs int, now time.Time) {
	e.mu.Lock()
	if e.yieldSpent { // yielding became spent meanwhile
		e.mu.Unlock()
		return
	}
	changed, paused := e.setYieldLocked(true, blobs, now)
	e.mu.Unlock()
	e.pause(ctx, paused)
	if changed {
		e.yieldChanged(true, blobs, len(paused))
	}
}
