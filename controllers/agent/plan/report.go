package plan

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/pace"
)

// Report is what the agent remembers of its NodeWarm's status writes, and
// decides from when the next one is due: the status last written (or
// found at start), when it was written, and since when the status to
// write has differed from it. The zero Report has written nothing.
type Report struct {
	written      *warmv1.NodeWarmStatus
	writtenAt    time.Time
	changedSince time.Time
}

// Found notes st, read from the API server, as written by an earlier run:
// an agent restart with nothing new to say writes nothing.
func (r *Report) Found(st warmv1.NodeWarmStatus) { r.written = st.DeepCopy() }

// Wrote notes st as written at now.
func (r *Report) Wrote(st warmv1.NodeWarmStatus, now time.Time) {
	r.written, r.writtenAt, r.changedSince = st.DeepCopy(), now, time.Time{}
}

// Last is the status last written or found; nil when there is none.
func (r *Report) Last() *warmv1.NodeWarmStatus { return r.written }

// Pacing is how often the NodeWarm's status may be written while pulls
// are under way.
type Pacing struct {
	// Interval is how long a change waits, and the least time between two
	// such writes.
	Interval time.Duration
	// Bytes is the least time between two writes for which only the bytes
	// of pulls under way moved; 0: such a change is never written alone.
	Bytes time.Duration
	// Served is the least time between two writes for which only the
	// counts of starts served warm moved; 0: never written alone.
	Served time.Duration
	// Retries is the least time between two writes for which only
	// retries of failing pulls moved (see retriesAsWritten); 0: each is
	// written like any change.
	Retries time.Duration
}

// Due says whether st is to be written at now, or else how long to wait
// (0: nothing new to write), under the pacing rule (internal/pace): a
// settled status (no pull under way) at once; progress once it has waited
// Interval since the status first changed, so a burst of finished pulls
// coalesces into one write and a warm shorter than the interval costs one
// write (its result). The write that ended last counts too: a slow API
// server gets fewer writes, not a backlog. A status that differs only in
// its pulls' bytes waits Bytes since the last write: the bytes move all
// the time, and would otherwise cost a write every Interval. One that
// differs only in its served counts waits Served likewise: a busy node
// starts containers all day. One whose only news is retries of failing
// pulls (and slow facts) waits Retries since the last write: images that
// keep failing alike would otherwise cost a write at each retry.
func (r *Report) Due(st warmv1.NodeWarmStatus, now time.Time, p Pacing) (time.Duration, bool) {
	if r.written != nil && sameReport(*r.written, st) {
		r.changedSince = time.Time{}
		return 0, false
	}
	if r.written != nil && sameReport(withoutServed(withoutProgress(*r.written)), withoutServed(withoutProgress(st))) {
		r.changedSince = time.Time{}
		every := slowPace(*r.written, st, p)
		if every <= 0 {
			return 0, false
		}
		if wait := r.writtenAt.Add(every).Sub(now); wait > 0 {
			return wait, false
		}
		return 0, true
	}
	if r.written != nil && p.Retries > 0 {
		if folded, ok := retriesAsWritten(*r.written, st); ok &&
			sameReport(withoutServed(withoutProgress(*r.written)), withoutServed(withoutProgress(folded))) {
			r.changedSince = time.Time{}
			if wait := r.writtenAt.Add(p.Retries).Sub(now); wait > 0 {
				return wait, false
			}
			return 0, true
		}
	}
	interval := p.Interval
	if r.changedSince.IsZero() {
		r.changedSince = now
	}
	if wait := pace.Wait(st.Pulling == 0, latest(r.changedSince, r.writtenAt), now, interval); wait > 0 {
		return wait, false
	}
	return 0, true
}

// slowPace is the least time between writes for the slow facts that
// moved from written to st (the bytes of pulls, the served counts): the
// shortest of their paces; 0 when none may be written alone.
func slowPace(written, st warmv1.NodeWarmStatus, p Pacing) time.Duration {
	var every time.Duration
	if p.Bytes > 0 && !sameReport(withoutServed(written), withoutServed(st)) {
		every = p.Bytes
	}
	if p.Served > 0 && !sameReport(withoutProgress(written), withoutProgress(st)) && (every == 0 || p.Served < every) {
		every = p.Served
	}
	return every
}

// withoutServed is st without its counts of starts served warm.
func withoutServed(st warmv1.NodeWarmStatus) warmv1.NodeWarmStatus {
	st.ServedStarts = 0
	warms := make([]warmv1.WarmRef, len(st.Warms))
	for i, w := range st.Warms {
		w.ServedStarts = 0
		warms[i] = w
	}
	st.Warms = warms
	return st
}

// withoutProgress is st without the bytes of its pulls.
func withoutProgress(st warmv1.NodeWarmStatus) warmv1.NodeWarmStatus {
	st.PullProgress, st.Progress = nil, ""
	imgs := make([]warmv1.NodeImage, len(st.Images))
	for i, img := range st.Images {
		img.Progress = nil
		imgs[i] = img
	}
	st.Images = imgs
	return st
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sameReport compares two statuses, ignoring image filesystem byte counts
// unless the fill level moved: they drift with every pull anybody makes,
// and would otherwise cause writes that tell nobody anything.
func sameReport(a, b warmv1.NodeWarmStatus) bool {
	a.ImageFilesystem, b.ImageFilesystem = fsLevel(a.ImageFilesystem), fsLevel(b.ImageFilesystem)
	return equality.Semantic.DeepEqual(a, b)
}

func fsLevel(fs *warmv1.ImageFilesystem) *warmv1.ImageFilesystem {
	if fs == nil {
		return nil
	}
	return &warmv1.ImageFilesystem{Mountpoint: fs.Mountpoint, UsedPercent: fs.UsedPercent}
}
