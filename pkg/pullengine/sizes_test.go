package pullengine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// TestPausesFor chooses the large pulls to pause for a smaller image's
// waiting pull: on containerd 2 a pull left running with a blob waiting
// for the runtime's downloads would take the download the others free
// before the small pull's requests.
func TestPausesFor(t *testing.T) {
	started := time.Unix(1_000_000, 0)
	type pl struct {
		name            string
		done            int64
		moving, waiting bool
		priority        int32
		sizePauses      int
		notStarted      bool
	}
	cases := []struct {
		name  string
		pulls []pl
		want  []string
	}{
		{"each fetching, none waiting (containerd 1.6): the least fetched", []pl{
			{name: "a", done: 300, moving: true}, {name: "b", done: 100, moving: true}, {name: "c", done: 200, moving: true},
		}, []string{"b"}},
		{"one fetching with a blob waiting and one not fetching: those two, and the one with every blob fetching goes on", []pl{
			{name: "a", done: 500, moving: true}, {name: "b", done: 200, moving: true, waiting: true}, {name: "c", done: 0},
		}, []string{"b", "c"}},
		{"the most fetched waits for a download: it, not the least fetched, whose download would go to its blob", []pl{
			{name: "x", done: 900, moving: true, waiting: true}, {name: "y", done: 100, moving: true},
		}, []string{"x"}},
		{"none fetching that waits: also the least fetched, to free a download", []pl{
			{name: "a", done: 500, moving: true}, {name: "b", done: 300, moving: true}, {name: "c", done: 0, waiting: true},
		}, []string{"c", "b"}},
		{"a higher priority, one not started, one paused enough: never", []pl{
			{name: "hi", done: 1, moving: true, waiting: true, priority: 10},
			{name: "new", notStarted: true},
			{name: "spent", done: 2, moving: true, sizePauses: maxSizePauses},
			{name: "a", done: 900, moving: true},
		}, []string{"a"}},
		{"nothing to choose", []pl{{name: "hi", done: 1, moving: true, priority: 10}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &job{priority: 0}
			var running []*job
			names := map[*job]string{}
			for _, p := range c.pulls {
				j := &job{priority: p.priority, moving: p.moving, waiting: p.waiting, sizePauses: p.sizePauses,
					progress: &pull.Progress{Known: true, Done: p.done}}
				if !p.notStarted {
					j.startedAt = started
				}
				names[j] = p.name
				running = append(running, j)
			}
			var got []string
			for _, j := range pausesFor(running, w) {
				got = append(got, names[j])
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("paused %v, want %v", got, c.want)
			}
		})
	}
}

// TestTrackWaiting: a pull's blob whose ingest did not grow between two
// readings is waiting (containerd 2 opens it before the runtime's
// download limit lets its request go); one seen once, growing, or held
// in full is not.
func TestTrackWaiting(t *testing.T) {
	at := time.Unix(1_000_000, 0)
	store := newFakeContent(at)
	tr := newTrack(mustRef(t, "reg.example/app:v1"), at.Add(-time.Second))
	read := func(want bool) {
		t.Helper()
		at = at.Add(time.Second)
		ingests, _ := store.Ingests(context.Background())
		if err := tr.update(context.Background(), store, ingests, at); err != nil {
			t.Fatal(err)
		}
		if tr.waiting != want {
			t.Fatalf("waiting = %v, want %v (ingests %+v)", tr.waiting, want, ingests)
		}
	}
	store.write(l1Digest, 0)
	store.write(l2Digest, 0)
	read(false) // seen once: not known yet
	store.write(l1Digest, 100)
	read(true) // l2 still at 0
	store.write(l1Digest, 200)
	store.write(l2Digest, 50)
	read(false)
	store.write(l2Digest, 80)
	read(true) // l1 stopped at 200
	store.mu.Lock()
	delete(store.ingests, l1Digest)
	store.held[l1Digest] = store.held[cfgDigest]
	store.mu.Unlock()
	store.write(l2Digest, 90)
	read(false) // l1 in full
}

// TestSuccessorStaysHeld: a large pull paused for a smaller image's is
// asked for again while it stops (the agent asks on every pass); the new
// successor is still held back until the smaller pull ends. Were it not,
// it would start in the slot the pause freed and, on containerd 2, queue
// its layers for the runtime's downloads before the smaller pull's (9 s
// of BenchmarkWarmBigAndSmall's 50 MB image).
func TestSuccessorStaysHeld(t *testing.T) {
	e := New(newFakeService(), Options{MaxParallelPulls: 3, Registerer: prometheus.NewRegistry()})
	big, small := mustRef(t, "reg.example/big:v1"), mustRef(t, "reg.example/small:v1")
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.newJob(small, Request{Image: small.Original()}, nil, "s")
	j := e.newJob(big, Request{Image: big.Original()}, nil, "b")
	e.jobs[small.String()], e.jobs[big.String()] = w, j
	j.running = true
	e.pauseForSizeLocked(j, w)
	e.enqueueLocked(admitted{req: Request{Image: big.Original()}, ref: big})
	n := j.successor
	if n == nil || !e.heldForSmallLocked(n) {
		t.Fatal("the new successor is not held back for the smaller image's pull")
	}
	if n.sizePauses != 1 {
		t.Errorf("successor paused %d times for size, want 1", n.sizePauses)
	}
}
