package imagewarm

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// paceStatus aggregates an ImageWarm of one image at generation gen over
// nodes whose agents report the given states ("" for a node whose agent has
// not reported).
func paceStatus(t *testing.T, gen int64, states ...warmv1.ImageState) warmv1.ImageWarmStatus {
	t.Helper()
	iw := iwNewWarm(gen, nil, "nginx")
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for i, s := range states {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, iwNodeMeta(name))
		if s != "" {
			reports = append(reports, iwReport(name, iwWebAt(gen), iwImg("nginx", s)))
		}
	}
	st, err := aggregateStatus(iw, newFleet(nodes, reports))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSettled(t *testing.T) {
	P, Q, B, F := warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageBackOff, warmv1.ImageFailed
	cases := []struct {
		name string
		st   warmv1.ImageWarmStatus
		want bool
	}{
		{"never aggregated", warmv1.ImageWarmStatus{}, false},
		{"every node warm", paceStatus(t, 1, P, P, P), true},
		{"warm or failed", paceStatus(t, 1, P, B, F), true},
		{"no matching node", paceStatus(t, 1), true},
		{"one node of three finished, the others pulling", paceStatus(t, 1, P, Q, Q), false},
		{"two finished, one not reporting", paceStatus(t, 1, P, P, ""), false},
		{"one failed, one pulling", paceStatus(t, 1, F, Q), false},
		{"queued", paceStatus(t, 1, warmv1.ImageQueued), false},
	}
	for _, c := range cases {
		if got := settled(&c.st); got != c.want {
			t.Errorf("%s: settled = %v, want %v (nodes %+v)", c.name, got, c.want, c.st.Nodes)
		}
	}
}

func TestWriteDelay(t *testing.T) {
	P, Q, B := warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageBackOff
	var (
		never       = warmv1.ImageWarmStatus{}
		silent      = paceStatus(t, 1, "", "", "")
		oneDone     = paceStatus(t, 1, P, Q, Q)
		twoDone     = paceStatus(t, 1, P, P, Q)
		oneSilent   = paceStatus(t, 1, P, P, "")
		warm        = paceStatus(t, 1, P, P, P)
		warmSmaller = paceStatus(t, 1, P, P)
		failed      = paceStatus(t, 1, P, P, B)
		warmGen2    = paceStatus(t, 2, P, P, P)
		warmServed  = warm
		twoServed   = twoDone
	)
	warmServed.ServedStarts, twoServed.ServedStarts = 7, 7
	now := time.Unix(1000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const ms = time.Millisecond
	cases := []struct {
		name          string
		written, next *warmv1.ImageWarmStatus
		h             writeHistory
		want          time.Duration
	}{
		{"first write", &never, &silent, writeHistory{}, 0},
		{"progress after a write 300ms ago waits", &silent, &oneDone, writeHistory{last: ago(300 * ms)}, 700 * ms},
		{"progress after the interval goes", &oneDone, &twoDone, writeHistory{last: ago(time.Second)}, 0},
		{"all warm after progress 300ms ago goes at once", &twoDone, &warm, writeHistory{last: ago(300 * ms)}, 0},
		{"all warm or failed goes at once", &twoDone, &failed, writeHistory{last: ago(10 * ms)}, 0},
		{"one node of three finished is progress", &silent, &oneDone, writeHistory{last: ago(10 * ms)}, 990 * ms},
		{"a silent node is progress", &twoDone, &oneSilent, writeHistory{last: ago(300 * ms)}, 700 * ms},
		{"a warm fleet losing a node waits", &warm, &warmSmaller, writeHistory{last: ago(300 * ms)}, 700 * ms},
		{"warm to failed is a new result", &warm, &failed, writeHistory{last: ago(300 * ms)}, 0},
		{"warm on a new generation is a new result", &warm, &warmGen2, writeHistory{last: ago(300 * ms)}, 0},
		{"a second early write within the interval waits", &twoDone, &warm, writeHistory{last: ago(300 * ms), early: ago(500 * ms)}, 700 * ms},
		{"an early write an interval ago allows another", &twoDone, &warm, writeHistory{last: ago(300 * ms), early: ago(time.Second)}, 0},
		{"served starts alone wait their interval", &warm, &warmServed, writeHistory{last: ago(time.Minute)}, DefaultServedInterval - time.Minute},
		{"served starts alone go once it is over", &warm, &warmServed, writeHistory{last: ago(DefaultServedInterval)}, 0},
		{"served starts with progress are progress", &oneDone, &twoServed, writeHistory{last: ago(time.Second)}, 0},
	}
	for _, c := range cases {
		if got := writeDelay(c.written, c.next, c.h, now, time.Second, DefaultServedInterval); got != c.want {
			t.Errorf("%s: writeDelay = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStatusPacerAggregation(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newStatusPacer(time.Second, 100*time.Millisecond, func() time.Time { return now })
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	for i := range aggregateBurst {
		if w := p.aggregateWait(a); w != 0 {
			t.Fatalf("aggregation %d of the burst waits %v", i+1, w)
		}
	}
	near := func(got, want time.Duration) bool { return (got - want).Abs() < time.Millisecond }
	if w := p.aggregateWait(a); !near(w, 100*time.Millisecond) {
		t.Errorf("after the burst: wait %v, want 100ms", w)
	}
	if w := p.aggregateWait(b); w != 0 {
		t.Errorf("another ImageWarm waits %v", w)
	}
	now = now.Add(40 * time.Millisecond)
	if w := p.aggregateWait(a); !near(w, 60*time.Millisecond) {
		t.Errorf("40ms later: wait %v, want 60ms", w)
	}
	now = now.Add(60 * time.Millisecond)
	if w := p.aggregateWait(a); w != 0 {
		t.Errorf("an interval later: wait %v", w)
	}
	p.forget(a)
	if _, ok := p.warms[a]; ok {
		t.Error("a forgotten ImageWarm is kept")
	}
	var nilPacer *statusPacer
	nilPacer.wrote(a)
	if w := nilPacer.aggregateWait(a) + nilPacer.writeWait(a, &warmv1.ImageWarmStatus{}, &warmv1.ImageWarmStatus{}); w != 0 {
		t.Errorf("nil pacer waits %v", w)
	}
}

// TestProgressSpacedByWatchers checks that progress writes are spaced in
// proportion to the agents receiving them above watchersPerInterval, and
// that a settled result still goes out at once.
func TestProgressSpacedByWatchers(t *testing.T) {
	for _, c := range []struct {
		watchers int
		want     time.Duration
	}{{0, time.Second}, {watchersPerInterval, time.Second}, {2 * watchersPerInterval, 2 * time.Second}, {10 * watchersPerInterval, 10 * time.Second}} {
		if got := progressInterval(time.Second, c.watchers); got != c.want {
			t.Errorf("progressInterval(1s, %d) = %v, want %v", c.watchers, got, c.want)
		}
	}
	now := time.Unix(1000, 0)
	p := newStatusPacer(time.Second, 100*time.Millisecond, func() time.Time { return now })
	p.observeWatchers(5 * watchersPerInterval)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	progress := func(ready int32) *warmv1.ImageWarmStatus {
		return &warmv1.ImageWarmStatus{ObservedGeneration: 1, Nodes: warmv1.NodeCounts{Matching: 5000, Ready: ready, Pulling: 5000 - ready}}
	}
	p.wrote(key)
	now = now.Add(2 * time.Second)
	if w := p.writeWait(key, progress(0), progress(10)); w != 3*time.Second {
		t.Errorf("progress 2s after a write with 5,000 watchers waits %v, want 3s", w)
	}
	done := &warmv1.ImageWarmStatus{ObservedGeneration: 1, Nodes: warmv1.NodeCounts{Matching: 5000, Ready: 5000}}
	if w := p.writeWait(key, progress(10), done); w != 0 {
		t.Errorf("a settled result waits %v", w)
	}
}

// paceSim runs the reconciler's decisions (Reconcile and writeStatus without
// the API server) on a fake clock: reports arrive at given times, requeues
// fire when due, and writes are recorded.
type paceSim struct {
	t       *testing.T
	now     time.Time
	p       *statusPacer
	iw      *warmv1.ImageWarm
	nodes   []metav1.PartialObjectMetadata
	reports map[string]warmv1.NodeWarm
	due     time.Time // the pending requeue; zero when none

	folds  int
	writes []time.Time
}

func newPaceSim(t *testing.T, nodes int, images ...string) *paceSim {
	s := &paceSim{t: t, now: time.Unix(1000, 0), iw: iwNewWarm(1, nil, images...), reports: map[string]warmv1.NodeWarm{}}
	s.p = newStatusPacer(time.Second, 100*time.Millisecond, func() time.Time { return s.now })
	for i := range nodes {
		s.nodes = append(s.nodes, iwNodeMeta(fmt.Sprintf("n%04d", i)))
	}
	return s
}

// at moves the clock to t, running the requeues due on the way.
func (s *paceSim) at(t time.Duration) {
	to := time.Unix(1000, 0).Add(t)
	for !s.due.IsZero() && !s.due.After(to) {
		s.now, s.due = s.due, time.Time{}
		s.reconcile()
	}
	s.now = to
}

// report stores node i's report of every image in state, at time t, and
// reconciles as the NodeWarm's watch event would make the controller do.
func (s *paceSim) report(t time.Duration, i int, state warmv1.ImageState) {
	s.at(t)
	var imgs []warmv1.NodeImage
	for _, img := range s.iw.Spec.Images {
		imgs = append(imgs, iwImg(string(img), state))
	}
	name := s.nodes[i].Name
	s.reports[name] = iwReport(name, iwWebAt(1), imgs...)
	s.reconcile()
}

func (s *paceSim) reconcile() {
	key := types.NamespacedName{Namespace: s.iw.Namespace, Name: s.iw.Name}
	if w := s.p.aggregateWait(key); w > 0 {
		s.requeue(w)
		return
	}
	s.folds++
	reports := make([]warmv1.NodeWarm, 0, len(s.reports))
	for _, r := range s.reports {
		reports = append(reports, r)
	}
	st, err := aggregateStatus(s.iw, newFleet(s.nodes, reports))
	if err != nil {
		s.t.Fatal(err)
	}
	if equality.Semantic.DeepEqual(s.iw.Status, st) {
		return
	}
	if w := s.p.writeWait(key, &s.iw.Status, &st); w > 0 {
		s.requeue(w)
		return
	}
	s.iw.Status = st
	s.p.wrote(key)
	s.writes = append(s.writes, s.now)
}

// requeue keeps the earlier of two requeues, as the work queue does.
func (s *paceSim) requeue(w time.Duration) {
	if at := s.now.Add(w); s.due.IsZero() || at.Before(s.due) {
		s.due = at
	}
}

func (s *paceSim) ready() bool {
	return meta.IsStatusConditionTrue(s.iw.Status.Conditions, warmv1.ConditionReady)
}

// TestPaceOneNodeWarm is BenchmarkTimeToWarm's warm on the fake clock: one
// node, ten images, the agent's two NodeWarm writes (under way, done). Ready
// is written when the last report comes, even just after a progress write,
// in at most three writes.
func TestPaceOneNodeWarm(t *testing.T) {
	var images []string
	for i := range 10 {
		images = append(images, fmt.Sprintf("registry.example:5000/perf/ten%d:v1", i))
	}
	for _, done := range []time.Duration{300 * time.Millisecond, 1020 * time.Millisecond, 1100 * time.Millisecond, 3 * time.Second} {
		t.Run(fmt.Sprintf("done at %v", done), func(t *testing.T) {
			s := newPaceSim(t, 1, images...)
			s.reconcile() // the ImageWarm's creation
			s.report(30*time.Millisecond, 0, warmv1.ImagePulling)
			s.report(done, 0, warmv1.ImagePresent)
			if !s.ready() {
				t.Fatalf("not Ready when the last report came at %v; writes at %v", done, s.writes)
			}
			if last := s.writes[len(s.writes)-1]; !last.Equal(s.now) {
				t.Errorf("Ready written %v after the last report", last.Sub(s.now))
			}
			s.at(done + 5*time.Second)
			if len(s.writes) > 3 {
				t.Errorf("%d ImageWarm writes for a one-node warm, want at most 3: %v", len(s.writes), s.writes)
			}
		})
	}
}

// TestPaceFleet has 1,000 nodes report a warm over five seconds, each
// under way then done, and checks the work stays bounded: aggregations at
// most a burst plus one per 100 ms, progress writes at most one a second,
// and Ready written within 100 ms of the last report.
func TestPaceFleet(t *testing.T) {
	const nodes = 1000
	s := newPaceSim(t, nodes, "nginx", "redis")
	s.reconcile()
	spread := 5 * time.Second
	step := spread / (2 * nodes)
	for i := range nodes {
		s.report(time.Duration(i)*step, i, warmv1.ImagePulling)
	}
	for i := range nodes {
		s.report(spread/2+time.Duration(i)*step, i, warmv1.ImagePresent)
		if i < nodes-1 && settled(&s.iw.Status) {
			t.Fatalf("settled with %d of %d nodes done: %+v", i+1, nodes, s.iw.Status.Nodes)
		}
	}
	last := s.now
	s.at(spread + 5*time.Second)
	if !s.ready() {
		t.Fatalf("not Ready: %+v", s.iw.Status.Nodes)
	}
	if lag := s.writes[len(s.writes)-1].Sub(last); lag > 100*time.Millisecond {
		t.Errorf("Ready written %v after the last report", lag)
	}
	if limit := aggregateBurst + int(spread/(100*time.Millisecond)) + 1; s.folds > limit {
		t.Errorf("%d aggregations for %d reports in %v, want at most %d", s.folds, 2*nodes, spread, limit)
	}
	if limit := int(spread/time.Second) + 2; len(s.writes) > limit {
		t.Errorf("%d writes in %v, want at most %d: %v", len(s.writes), spread, limit, s.writes)
	}
	t.Logf("%d aggregations, %d writes for %d reports", s.folds, len(s.writes), 2*nodes)
}
