package pullengine

import (
	"context"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// What an image takes on disk is known only once the runtime unpacks it:
// the manifest gives compressed sizes, and a gzip layer of a few megabytes
// can unpack to a hundred gigabytes. So while pulls run, the watcher reads
// the disk guard's level at every reading, every unpackPoll while a
// pull writes what no reservation covers (all its bytes fetched: it
// unpacks; or its size not known yet). When the filesystem would pass the
// threshold within three readings at the pace it fills, less what the
// pulls still fetching reserve (fit.go), the pulls writing unreserved
// bytes are cancelled, as DiskPressure, while they unpack: the runtime
// drops an aborted unpack's snapshot, and the room comes back. What the
// image was seen to take is kept, so that its next pulls wait for the
// room instead of starting again from twice its compressed bytes.
//
// The level is the whole filesystem's, as the guard reads it. Which pull
// writes unreserved bytes is told by the pull's bytes as the content
// store shows them; whether it outgrew its admission, by the
// filesystem's growth since it started (no more than that is its), and
// then by what its layers' snapshots take (snapshots.go). A pull known
// to be within its admission goes on: someone else took the room, and
// the guard holds new pulls. Both views are containerd's only. Without the content view the watcher does not run, and nothing
// watches an unpack (CRI-O, cri-dockerd): the guard's threshold and the
// runtime's own out-of-space failure are all there is.

// unpackPoll is how often the watcher reads the disk while a pull writes
// unreserved bytes, and once as a pull starts: a gzip layer of zeros
// unpacks at a gigabyte a second and more on containerd 2.
const unpackPoll = 100 * time.Millisecond

// unpackReadAge is the oldest disk reading the unpack check uses: below
// the watcher's fastest pace, so each of its readings reads the disk.
const unpackReadAge = unpackPoll / 2

// stepReadings is how many readings' growth the unpack check keeps as
// its margin: one for the reading's lag, one for a cancel to stop the
// runtime, one for a reading late on a busy node.
const stepReadings = 3

// take is one running pull as the unpack check sees it.
type take struct {
	// reserve is the room still reserved for it: unpackFactor times the
	// compressed bytes it has still to fetch.
	reserve int64
	// loose says it writes bytes no reservation covers: it unpacks with
	// every byte fetched, or its size is unknown.
	loose bool
	// admitted is what it was let in for, unpackFactor times its
	// compressed bytes; grown how much the filesystem grew since it
	// started (a bound from above of what it wrote; when read); unpacked
	// what its snapshots were seen to take (when measured: snapshots.go).
	admitted, grown, unpacked int64
	started, measured         bool
}

// within says the pull is known to have written no more than it was
// admitted for: the room is taken by someone else.
func (t take) within() bool {
	return t.started && t.grown <= t.admitted || t.measured && t.unpacked <= t.admitted
}

// takeOf is how a pull with progress p takes room.
func takeOf(p pull.Progress) take {
	if !p.Known {
		return take{loose: true}
	}
	left := max(p.Total-p.Done, 0)
	return take{reserve: unpackFactor * left, loose: left == 0, admitted: unpackFactor * p.Total}
}

// outgrown returns the indexes of the pulls to cancel: the loose ones,
// when room (below the threshold) less what the others reserve would not
// hold step more bytes, the growth expected before a cancel takes effect.
// Pulls still fetching within their reservation go on.
func outgrown(room, step int64, takes []take) []int {
	left := room - step
	for _, t := range takes {
		left -= t.reserve
	}
	if left >= 0 {
		return nil
	}
	var out []int
	for i, t := range takes {
		if t.loose {
			out = append(out, i)
		}
	}
	return out
}

// culprits narrows the pulls outgrown would cancel to those not known
// to be within what they were admitted for: the disk's level alone does
// not say who filled it (another pull, a container's logs).
func culprits(takes []take, cancels []int) []int {
	var out []int
	for _, i := range cancels {
		if !takes[i].within() {
			out = append(out, i)
		}
	}
	return out
}

// disk is the watcher's last fresh reading of the image filesystem: its
// used bytes and when, for the pace it fills at.
type disk struct {
	used uint64
	at   time.Time
	// last is the step the reading at gave.
	last int64
}

// step is how much the filesystem grows in stepReadings of next at the
// pace seen since the last reading, and takes used, read at now, as the
// last reading; the same reading seen again gives the same step. A busy
// node that took longer than next between readings may again: the gap
// stands in for next then. Readings of the kubelet's figures are a second
// apart (kubeletReadAge), which widens the step as much.
func (d *disk) step(used uint64, now time.Time, next time.Duration) int64 {
	if !d.at.IsZero() && now.Equal(d.at) { // the same reading again
		return d.last
	}
	var rate float64
	gap := next
	if !d.at.IsZero() && now.After(d.at) {
		gap = max(next, now.Sub(d.at))
		if used > d.used {
			rate = float64(used-d.used) / now.Sub(d.at).Seconds()
		}
	}
	d.used, d.at = used, now
	d.last = int64(rate * stepReadings * gap.Seconds())
	return d.last
}

// checkUnpack reads the disk for the running pulls jobs and cancels those
// that outgrow the room. It says whether one writes unreserved bytes, for
// the watcher to read again soon; not while the level is unknown, which
// decides nothing.
func (e *Engine) checkUnpack(ctx context.Context, w *watcher, jobs []*job) (soon bool) {
	if len(jobs) == 0 || e.guard.threshold >= 100 {
		w.disk = disk{}
		return false
	}
	u, readAt := e.guard.usageWithin(ctx, e.guard.fastAge())
	room, known := e.guard.room(u)
	if !known {
		w.disk = disk{}
		return false
	}
	takes := make([]take, len(jobs))
	for i, j := range jobs {
		takes[i] = takeOf(w.tracks[j].p)
		// A pull whose size stays unknown past resolvingFor may never
		// show it: it is still checked, at the usual pace.
		soon = soon || takes[i].loose && (w.tracks[j].p.Known || e.clock.Since(j.startedAt) < resolvingFor)
	}
	used := u.CapacityBytes - u.AvailableBytes
	step := w.disk.step(used, readAt, unpackPoll)
	cancels := outgrown(room, step, takes)
	for _, i := range cancels {
		e.weigh(ctx, &takes[i], jobs[i], w.tracks[jobs[i]], used)
	}
	for _, i := range culprits(takes, cancels) {
		e.cancelOutgrown(jobs[i], w.tracks[jobs[i]].p, takes[i].unpacked, u, room, used, len(jobs) == 1)
	}
	return soon
}

// weigh adds to t what is known of what j's pull wrote: the filesystem's
// growth since it started, and, when that is more than it was admitted
// for, what its snapshots take (only then: a snapshot's usage is a walk
// of its files).
func (e *Engine) weigh(ctx context.Context, t *take, j *job, tr *track, used uint64) {
	e.mu.Lock()
	start := j.atStart
	e.mu.Unlock()
	if start.read {
		t.grown, t.started = int64(used)-int64(start.used), true
	}
	if !t.within() {
		t.unpacked, t.measured = e.unpackedBy(ctx, tr)
	}
}

// unpackStart is what the disk held when a pull started, for the unpack
// check to tell what the pull took.
type unpackStart struct {
	// used is the image filesystem's used bytes; room, what was left
	// below the threshold less what the other running pulls reserved.
	used uint64
	room int64
	read bool
}

// noteStart reads the disk, fresh, as j's pull starts; only where the
// unpack check runs (the watcher needs the content view).
func (e *Engine) noteStart(ctx context.Context, j *job) {
	if e.content == nil || e.guard.threshold >= 100 {
		return
	}
	u, _ := e.guard.usageWithin(ctx, e.guard.fastAge())
	room, known := e.guard.room(u)
	if !known {
		return
	}
	e.mu.Lock()
	j.atStart = unpackStart{used: u.CapacityBytes - u.AvailableBytes, room: room - e.reservedLocked(j), read: true}
	e.mu.Unlock()
}

// cancelOutgrown cancels j's pull for size, keeping a lower bound of
// what its image unpacks to: more than the room it started with, more
// than it took since (by the filesystem's growth, when it ran alone) plus
// the room still left, and at least what its snapshots were seen to take
// (seen).
func (e *Engine) cancelOutgrown(j *job, p pull.Progress, seen int64, u DiskUsage, room int64, used uint64, alone bool) {
	e.mu.Lock()
	start := j.atStart
	e.mu.Unlock()
	unpacked := seen
	if start.read {
		unpacked = max(unpacked, start.room)
		if alone && used > start.used {
			unpacked = max(unpacked, int64(used-start.used)+max(room, 0))
		}
	}
	n := noRoom{need: need{fetch: p.Total, unpacked: max(unpacked, 1)}, room: room,
		mountpoint: u.Mountpoint, threshold: e.guard.threshold}
	e.mu.Lock()
	e.needs[j.ref.String()] = n.need
	e.mu.Unlock()
	j.cancel(n)
}
