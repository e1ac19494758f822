package pullengine

import (
	"context"
	"fmt"
	"time"

	"github.com/warmer-dev/warmer/internal/bytesize"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// watch reads the runtime's content store every watchEvery while pulls
// run, until ctx ends: each running pull's progress is updated, the
// metrics of bytes fetched and throughput follow, and a pull whose bytes
// stopped moving for the stall timeout is cancelled as Stalled. While no
// pull runs, a reading costs one look at the job table.
func (e *Engine) watch(ctx context.Context) {
	timer := e.clock.NewTimer(e.watchEvery)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		e.watchOnce(ctx)
		timer.Reset(e.watchEvery)
	}
}

// watchOnce takes one reading of every running pull.
func (e *Engine) watchOnce(ctx context.Context) {
	jobs := e.pulling()
	if len(jobs) == 0 {
		e.metrics.throughput.Set(0)
		return
	}
	ingests, err := e.content.Ingests(ctx)
	now := e.clock.Now()
	var rate float64
	for _, j := range jobs {
		if j.track == nil {
			j.track = newTrack(j.ref, j.startedAt)
		}
		if err == nil {
			err = j.track.update(ctx, e.content, ingests, now)
		}
		if err != nil {
			// Unknown is not stalled: the stall clock starts again.
			j.track.p.MovedAt = now
		}
		e.metrics.fetchedBytes.Add(float64(j.track.newlyFetched()))
		rate += j.track.p.Rate
		p := j.track.p
		e.mu.Lock()
		j.progress = &p
		e.mu.Unlock()
		if e.stalled(p, now) {
			j.cancel(stalled{after: e.stall, progress: p})
		}
	}
	e.metrics.throughput.Set(rate)
	if err != nil {
		e.logger().V(1).Info("Reading the runtime's content store failed; pull progress not updated", "error", err.Error())
	}
}

// pulling returns the jobs whose pull has started.
func (e *Engine) pulling() []*job {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*job
	for _, j := range e.jobs {
		if j.running && !j.startedAt.IsZero() && !j.notWanted {
			out = append(out, j)
		}
	}
	return out
}

// stalled says whether a pull's bytes have not moved for the stall
// timeout. A pull whose manifest is not found yet does not stall (what it
// fetches is unknown), nor one with every byte in (the runtime unpacks).
func (e *Engine) stalled(p pull.Progress, now time.Time) bool {
	return e.stall > 0 && p.Known && p.Done < p.Total && now.Sub(p.MovedAt) >= e.stall
}

// message says how far a stalled pull had come.
func (s stalled) message() string {
	return fmt.Sprintf("pull stalled: no bytes arrived for %s, at %s of %s", s.after,
		bytesize.IEC(s.progress.Done), bytesize.IEC(s.progress.Total))
}
