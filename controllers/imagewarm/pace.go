package imagewarm

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/pace"
)

// DefaultAggregateInterval is the least time between two aggregations of one
// ImageWarm once its short burst is spent; MinWriteInterval when that is
// shorter.
const DefaultAggregateInterval = 100 * time.Millisecond

// aggregateBurst is how many aggregations of one ImageWarm may follow each
// other without the interval. A few let the report that ends a warm be
// folded at once even when a progress write was folded just before it;
// under a fleet's stream of reports the interval holds.
const aggregateBurst = 3

// statusPacer decides, per ImageWarm, when the controller may fold the
// agents' reports and when it may write the result. Folding is a token
// bucket, so a thousand agents reporting on one ImageWarm cost a few
// aggregations a second, not one per report. Writing is where a result and
// progress part: a status that settles (see writeWait) goes out at once,
// progress at most once per interval. A nil statusPacer never defers.
type statusPacer struct {
	interval  time.Duration // least time between two progress writes
	served    time.Duration // least time between two writes of servedStarts alone
	aggregate time.Duration // least time between two aggregations after the burst
	now       func() time.Time

	mu    sync.Mutex
	warms map[types.NamespacedName]*paceState
	// watchers is how many agents receive each status write (see
	// progressInterval).
	watchers int
}

// watchersPerInterval is how many agents may receive progress writes of
// one ImageWarm per interval. Every agent watches every ImageWarm (it
// decides from their specs what its node wants), so each status write
// reaches every node: at 10,000 nodes one write of a 2 KB status sends
// 20 MB of watch events. At 1,000 simulated nodes these writes, once a
// second, were nine tenths of the API server's watch bytes during a warm
// (docs/performance.md, section 3). Above this many agents progress is
// spaced in proportion (5 s at 1,000 nodes, 50 s at 10,000), so that cost
// stays flat as the cluster grows; a settled result is still written at
// once.
const watchersPerInterval = 200

// progressInterval is the least time between two progress writes of one
// ImageWarm when watchers agents receive each: interval, stretched in
// proportion above watchersPerInterval.
func progressInterval(interval time.Duration, watchers int) time.Duration {
	if watchers <= watchersPerInterval {
		return interval
	}
	return time.Duration(float64(interval) * float64(watchers) / watchersPerInterval)
}

// observeWatchers records how many agents watch ImageWarms: the NodeWarms
// the last aggregation saw.
func (p *statusPacer) observeWatchers(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchers = n
}

// paceState is what the pacer knows of one ImageWarm.
type paceState struct {
	folds *rate.Limiter
	// writes holds the times of the last write and of the last write made
	// before the interval was over because the status settled.
	writes writeHistory
	// bound is when the RolloutBound was last written.
	bound time.Time
}

// writeHistory is when an ImageWarm's status was last written, and when a
// settled status was last written early; zero when never.
type writeHistory struct {
	last, early time.Time
}

func newStatusPacer(interval, aggregate time.Duration, now func() time.Time) *statusPacer {
	return &statusPacer{interval: interval, aggregate: min(aggregate, interval), served: DefaultServedInterval, now: now,
		warms: map[types.NamespacedName]*paceState{}}
}

// aggregateWait takes one of key's aggregation tokens and returns zero, or,
// when none is left, returns how long until one is.
func (p *statusPacer) aggregateWait(key types.NamespacedName) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	s := p.state(key)
	if s.folds.AllowN(now, 1) {
		return 0
	}
	missing := 1 - s.folds.TokensAt(now)
	return time.Duration(missing * float64(p.aggregate))
}

// writeWait is how long key must wait before next, aggregated from the
// cluster, may replace written, its current status: zero when it may be
// written now.
func (p *statusPacer) writeWait(key types.NamespacedName, written, next *warmv1.ImageWarmStatus) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return writeDelay(written, next, p.state(key).writes, p.now(), progressInterval(p.interval, p.watchers), p.served)
}

// wrote records a status write of key, now.
func (p *statusPacer) wrote(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	s := p.state(key)
	if now.Sub(s.writes.last) < progressInterval(p.interval, p.watchers) {
		s.writes.early = now
	}
	s.writes.last = now
}

// boundWait is how long key must wait before its RolloutBound may be
// written again: zero when now.
func (p *statusPacer) boundWait(key types.NamespacedName) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.state(key).bound.Add(BoundInterval).Sub(p.now()))
}

// boundWrote records a write of key's RolloutBound, now.
func (p *statusPacer) boundWrote(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state(key).bound = p.now()
}

// forget drops key, whose ImageWarm is gone.
func (p *statusPacer) forget(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.warms, key)
}

// state is key's entry, made when missing. Entries live until their
// ImageWarm is deleted: one small struct per ImageWarm, beside the
// ImageWarm itself in the manager's cache. The caller holds mu.
func (p *statusPacer) state(key types.NamespacedName) *paceState {
	s, ok := p.warms[key]
	if !ok {
		s = &paceState{folds: rate.NewLimiter(rate.Every(p.aggregate), aggregateBurst)}
		p.warms[key] = s
	}
	return s
}

// DefaultServedInterval is the least time between two writes of an
// ImageWarm's status for which only servedStarts moved, when
// Reconciler.ServedInterval is zero: a day's tally, which a busy cluster
// moves all day, and every write of which goes to every agent.
const DefaultServedInterval = 10 * time.Minute

// onlyServed says whether next differs from written in servedStarts alone.
func onlyServed(written, next *warmv1.ImageWarmStatus) bool {
	if written.ServedStarts == next.ServedStarts {
		return false
	}
	w := *written
	w.ServedStarts = next.ServedStarts
	return equality.Semantic.DeepEqual(&w, next)
}

// writeDelay decides when next may replace written, the status on the
// server, given the ImageWarm's write history: zero to write now. Progress
// waits until interval after the last write. A settled status that is a new
// result (see newResult) is written at once, unless another settled status
// was written early within the interval: then it waits its turn like
// progress. A status that differs in servedStarts alone waits served. So a status that flaps between progress and a result is still
// written at most twice per interval, and a warm that ends is reported as it
// ends.
func writeDelay(written, next *warmv1.ImageWarmStatus, h writeHistory, now time.Time, interval, served time.Duration) time.Duration {
	if onlyServed(written, next) {
		return pace.Wait(false, h.last, now, max(interval, served))
	}
	return pace.Wait(newResult(written, next) && now.Sub(h.early) >= interval, h.last, now, interval)
}

// settled says whether st is a result rather than progress: it was
// aggregated (it has a generation), every matching node has reported on
// that generation, and no node is pulling or waiting to pull. A fleet where
// some nodes are done and others still pull is not settled; one where every
// node is either warm or failed is.
func settled(st *warmv1.ImageWarmStatus) bool {
	return st.ObservedGeneration > 0 && st.Nodes.Pulling == 0 && st.Nodes.NotReporting == 0
}

// newResult says whether next is settled and tells the user something the
// written status does not: written was progress, or was a result for another
// generation, or its Ready or Degraded condition says otherwise. Settled
// statuses that differ only in counts (a node removed from a warm fleet) are
// not new results: they are spaced like progress, so a fleet being scaled
// down does not cost a write per node.
func newResult(written, next *warmv1.ImageWarmStatus) bool {
	switch {
	case !settled(next):
		return false
	case !settled(written), written.ObservedGeneration != next.ObservedGeneration:
		return true
	}
	for _, t := range [...]string{warmv1.ConditionReady, warmv1.ConditionDegraded} {
		a, b := meta.FindStatusCondition(written.Conditions, t), meta.FindStatusCondition(next.Conditions, t)
		if a == nil || b == nil || a.Status != b.Status || a.Reason != b.Reason {
			return true
		}
	}
	return false
}
