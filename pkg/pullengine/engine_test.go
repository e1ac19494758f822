package pullengine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// key is the normalised form of an image, as the runtime sees it.
func key(t testing.TB, image string) string { return mustRef(t, image).String() }

func TestSerialPriorityOrder(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	release := h.svc.block(key(t, "first"))
	h.enqueue("first", 0)
	h.svc.waitStarted(t, key(t, "first"))
	for _, r := range []struct {
		image    string
		priority int32
	}{{"low1", 0}, {"low2", 0}, {"high1", 5}, {"high2", 5}, {"bumped", 0}, {"neg", -1}} {
		if st := h.enqueue(r.image, r.priority); st.State != pull.StateQueued {
			t.Fatalf("%s: %s, want Queued", r.image, st.State)
		}
	}
	h.enqueue("bumped", 9) // a queued job takes its new priority
	release()
	for range 7 {
		h.result(t)
	}
	var want []string
	for _, img := range []string{"first", "bumped", "high1", "high2", "low1", "low2", "neg"} {
		want = append(want, key(t, img))
	}
	if got := h.svc.pulled(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pull order %q, want %q", got, want)
	}
}

func TestParallelCap(t *testing.T) {
	const limit, n = 2, 6
	h := newHarness(t, Options{MaxParallelPulls: limit})
	var releases []func()
	for i := range n {
		img := "img" + string(rune('a'+i))
		releases = append(releases, h.svc.block(key(t, img)))
		h.enqueue(img, 0)
	}
	<-h.svc.started
	<-h.svc.started
	select {
	case ref := <-h.svc.started:
		t.Fatalf("a third pull (%s) started beyond the cap of %d", ref, limit)
	case <-time.After(50 * time.Millisecond):
	}
	for i := range n {
		releases[i]()
		h.result(t)
	}
	if h.svc.maxInFlight != limit {
		t.Fatalf("max in flight %d, want %d", h.svc.maxInFlight, limit)
	}
}

func TestDeduplication(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 4})
	ref := key(t, "nginx")
	release := h.svc.block(ref)
	h.enqueue("nginx", 0)
	h.svc.waitStarted(t, ref)
	for _, spelling := range []string{"nginx", "library/nginx", "docker.io/library/nginx:latest", "index.docker.io/library/nginx", "nginx:latest"} {
		if st := h.enqueue(spelling, 3); st.State != pull.StatePulling || st.Ref != ref {
			t.Fatalf("%s: %+v, want the running pull", spelling, st)
		}
	}
	release()
	res := h.result(t)
	h.noResult(t)
	if got := h.svc.pulled(); len(got) != 1 {
		t.Fatalf("%d PullImage calls, want 1: %q", len(got), got)
	}
	if res.Image != "nginx" || res.Ref != ref {
		t.Fatalf("result under %q / %q, want the first spelling", res.Image, res.Ref)
	}
}

func TestCancelQueued(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	release := h.svc.block(key(t, "a"))
	h.enqueue("a", 0)
	h.svc.waitStarted(t, key(t, "a"))
	h.enqueue("b", 0)
	if !h.eng.Cancel("docker.io/library/b") {
		t.Fatal("Cancel(b) found nothing")
	}
	if res := h.result(t); res.Class != pull.ClassCanceled || res.Image != "b" {
		t.Fatalf("got %+v, want b cancelled", res)
	}
	release()
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("a: %+v", res)
	}
	if got := h.svc.pulled(); len(got) != 1 {
		t.Fatalf("a cancelled queued pull reached the runtime: %q", got)
	}
	if _, known := h.eng.Status("b"); known {
		t.Fatal("a cancelled image is still tracked")
	}
	if h.eng.Cancel("b") {
		t.Fatal("second Cancel(b) found a pull")
	}
}

func TestCancelRunning(t *testing.T) {
	h := newHarness(t, Options{})
	h.svc.block(key(t, "a"))
	h.enqueue("a", 0)
	h.svc.waitStarted(t, key(t, "a"))
	h.eng.Cancel("a")
	res := h.result(t)
	if res.Class != pull.ClassCanceled || !res.RetryAt.IsZero() || !strings.Contains(res.Message, "no longer wanted") {
		t.Fatalf("got %+v, want cancelled without back-off", res)
	}
	if st := h.enqueue("a", 0); st.State != pull.StateQueued && st.State != pull.StatePulling {
		t.Fatalf("re-enqueue after cancel: %s", st.State)
	}
}

func TestSync(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	h.svc.block(key(t, "a"))
	st := h.eng.Sync(h.ctx, []Request{{Image: "a"}, {Image: "b"}, {Image: "Bad Ref"}})
	if st[0].State != pull.StateQueued || st[1].State != pull.StateQueued || st[2].Last.Class != pull.ClassInvalidImageName {
		t.Fatalf("statuses %+v", st)
	}
	h.svc.waitStarted(t, key(t, "a"))
	// a is pulling and b queued; now only c is wanted.
	h.eng.Sync(h.ctx, []Request{{Image: "c"}})
	got := map[string]Class{}
	for range 3 {
		r := h.result(t)
		got[r.Image] = r.Class
	}
	want := map[string]Class{"a": pull.ClassCanceled, "b": pull.ClassCanceled, "c": ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if s, ok := h.eng.Status("c"); !ok || s.State != pull.StatePulled {
		t.Fatalf("c: %+v", s)
	}
}

func TestCancelledThenWantedAgain(t *testing.T) {
	h := newHarness(t, Options{})
	ref := key(t, "a")
	h.svc.block(ref)
	h.enqueue("a", 0)
	h.svc.waitStarted(t, ref)
	h.eng.Cancel("a")
	h.enqueue("a", 0) // before or after the cancelled pull has stopped
	if res := h.result(t); res.Class != pull.ClassCanceled {
		t.Fatalf("first: %+v", res)
	}
	h.svc.waitStarted(t, ref) // pulled again, still blocked
	if st, _ := h.eng.Status("a"); st.State != pull.StatePulling {
		t.Fatalf("status %s, want Pulling", st.State)
	}
}

func TestTimeout(t *testing.T) {
	h := newHarness(t, Options{PullTimeout: time.Minute})
	h.svc.block(key(t, "a"))
	h.enqueue("a", 0)
	h.svc.waitStarted(t, key(t, "a"))
	h.waitTimers(t, 1)
	h.clock.Step(time.Minute)
	res := h.result(t)
	if res.Class != pull.ClassTimeout || !strings.Contains(res.Message, "1m0s") {
		t.Fatalf("got %+v, want a timeout", res)
	}
	if want := h.clock.Now().Add(DefaultBackOffInitial); !res.RetryAt.Equal(want) {
		t.Fatalf("RetryAt %v, want %v: a timeout backs off", res.RetryAt, want)
	}
}

func TestRequestTimeoutOverrides(t *testing.T) {
	h := newHarness(t, Options{PullTimeout: time.Hour})
	h.svc.block(key(t, "a"))
	h.eng.Enqueue(h.ctx, Request{Image: "a", Timeout: 5 * time.Second})
	h.svc.waitStarted(t, key(t, "a"))
	h.waitTimers(t, 1)
	h.clock.Step(5 * time.Second)
	if res := h.result(t); res.Class != pull.ClassTimeout {
		t.Fatalf("got %+v", res)
	}
}

func TestInvalidImageNameNeverReachesRuntime(t *testing.T) {
	h := newHarness(t, Options{})
	for _, img := range []string{"", "not a ref", "127.0.0.1:35000/Test/UPPER:v1", "x@sha256:abc"} {
		st := h.enqueue(img, 0)
		if st.State != pull.StateFailed || st.Last == nil || st.Last.Class != pull.ClassInvalidImageName {
			t.Fatalf("%q: %+v", img, st)
		}
	}
	h.noResult(t)
	if got := h.svc.pulled(); len(got) != 0 {
		t.Fatalf("runtime called for invalid names: %q", got)
	}
}

func TestResultFields(t *testing.T) {
	h := newHarness(t, Options{})
	ref := key(t, "quay.io/team/app:v1")
	release := h.svc.block(ref)
	var started []string
	h.eng.listener = ListenerFuncs{
		Started:  func(r imageref.Reference, _ string) { started = append(started, r.String()) },
		Finished: func(r Result) { h.results <- r },
	}
	h.enqueue("quay.io/team/app:v1", 0)
	h.svc.waitStarted(t, ref)
	h.clock.Step(3 * time.Second)
	release()
	res := h.result(t)
	want := Result{Image: "quay.io/team/app:v1", Ref: ref, ImageRef: "sha256:id-" + ref, Digest: "quay.io/team/app@" + digestA,
		Size: 42 << 20, Duration: 3 * time.Second, Attempts: 1, Finished: h.clock.Now()}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("result\n got %+v\nwant %+v", res, want)
	}
	if !reflect.DeepEqual(started, []string{ref}) {
		t.Fatalf("PullStarted calls %q", started)
	}
	if st, _ := h.eng.Status("quay.io/team/app:v1"); st.State != pull.StatePulled || st.Last.ImageRef != res.ImageRef {
		t.Fatalf("status %+v", st)
	}
}

func TestStopCancelsRunning(t *testing.T) {
	svc := newFakeService()
	results := make(chan Result, 1)
	eng := New(svc, Options{Listener: ListenerFuncs{Finished: func(r Result) { results <- r }}})
	ctx, cancel := contextWithCancel()
	done := make(chan error)
	go func() { done <- eng.Start(ctx) }()
	svc.block(key(t, "a"))
	eng.Enqueue(ctx, Request{Image: "a"})
	svc.waitStarted(t, key(t, "a"))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.Class != pull.ClassCanceled {
		t.Fatalf("got %+v", r)
	}
	if err := eng.Start(ctx); err == nil {
		t.Fatal("second Start accepted")
	}
}

// TestMissingSince checks that a request for an image whose pull
// succeeded after the caller last saw it missing is answered from that
// pull, not pulled again: the pull ended while the caller was deciding.
func TestMissingSince(t *testing.T) {
	h := newHarness(t, Options{})
	seen := h.clock.Now()
	h.clock.Step(time.Second)
	h.enqueue("a", 0)
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("first pull: %+v", res)
	}
	st := h.eng.Sync(h.ctx, []Request{{Image: "a", MissingSince: seen}})
	if st[0].State != pull.StatePulled {
		t.Fatalf("status %+v, want Pulled from the pull that just ended", st[0])
	}
	if n := len(h.svc.pulled()); n != 1 {
		t.Fatalf("%d PullImage calls, want 1", n)
	}
	// Seen missing after that pull: the runtime lost it; pull again.
	h.clock.Step(time.Second)
	h.eng.Sync(h.ctx, []Request{{Image: "a", MissingSince: h.clock.Now()}})
	if res := h.result(t); !res.Succeeded() || len(h.svc.pulled()) != 2 {
		t.Fatalf("second pull: %+v after %d calls, want a new pull", res, len(h.svc.pulled()))
	}
}

// TestTags: a queued job takes the tag of the latest request, a running
// one keeps its own; results and statuses carry the tag the job pulled
// with; and a success under one tag is no answer to another tag's request
// (warmer's agent keeps each namespace's credentials apart this way).
func TestTags(t *testing.T) {
	h := newHarness(t, Options{})
	ref := key(t, "a")
	release := h.svc.block(ref)
	h.eng.Sync(h.ctx, []Request{{Image: "a", Tag: "team-a"}})
	h.svc.waitStarted(t, ref)
	st := h.eng.Sync(h.ctx, []Request{{Image: "a", Tag: "team-b"}})
	if st[0].State != pull.StatePulling || st[0].Tag != "team-a" {
		t.Fatalf("running job asked with another tag: %+v; want Pulling under team-a", st[0])
	}
	release()
	if res := h.result(t); !res.Succeeded() || res.Tag != "team-a" {
		t.Fatalf("result %+v; want success under team-a", res)
	}
	if s, _ := h.eng.Status("a"); s.Tag != "team-a" {
		t.Fatalf("status after the pull %+v; want team-a", s)
	}
	seen := h.clock.Now().Add(-time.Second)
	st = h.eng.Sync(h.ctx, []Request{{Image: "a", Tag: "team-b", MissingSince: seen}})
	if st[0].State == pull.StatePulled {
		t.Fatalf("team-b's request answered by team-a's pull: %+v", st[0])
	}
	if res := h.result(t); !res.Succeeded() || res.Tag != "team-b" || len(h.svc.pulled()) != 2 {
		t.Fatalf("team-b's pull: %+v after %d PullImage calls; want its own pull", res, len(h.svc.pulled()))
	}
}
