package pullengine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// foreignBlob is a layer some other client of the runtime is writing.
const foreignBlob = "sha256:kubelet"

// writeForeign has the fake store show the foreign blob written at at (a
// zero time removes it).
func (f *fakeContent) writeForeign(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at.IsZero() {
		delete(f.ingests, foreignBlob)
		delete(f.foreignAt, foreignBlob)
		return
	}
	f.ingests[foreignBlob] = 2 << 20
	f.foreignAt[foreignBlob] = at
}

// yieldHarness runs an engine over the fake store in mode, and records
// what its listener hears of yielding.
func yieldHarness(t *testing.T, mode YieldMode) (*harness, *fakeContent, chan bool) {
	content := newFakeContent(time.Unix(1_000_000, 0))
	h := newHarness(t, Options{Content: content, Yield: mode})
	heard := make(chan bool, 10)
	h.eng.listener = ListenerFuncs{Finished: func(r Result) { h.results <- r }, Yield: func(on bool) { heard <- on }}
	return h, content, heard
}

// pulling starts a pull of image that hangs until release is called.
func (h *harness) pulling(t *testing.T, image string) (release func()) {
	t.Helper()
	release = h.svc.block(key(t, image))
	h.enqueue(image, 0)
	h.svc.waitStarted(t, key(t, image))
	return release
}

// othersPull has the runtime write a blob for someone else until the
// engine yields.
func (h *harness) othersPull(t *testing.T, content *fakeContent) {
	t.Helper()
	h.until(t, "yielding", func() bool {
		content.writeForeign(h.clock.Now())
		return h.eng.Yielding().On
	})
}

// until steps the fake clock a second at a time until cond holds.
func (h *harness) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		h.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestYieldWait: while the runtime writes a blob none of the engine's
// pulls fetches, no new pull starts; the pull under way goes on; once the
// blob is done, the waiting pull starts. The listener and the metric say
// so.
func TestYieldWait(t *testing.T) {
	h, content, heard := yieldHarness(t, YieldWait)
	a, b := "reg.example/app:v1", "reg.example/other:v1"
	releaseA := h.pulling(t, a)
	h.svc.block(key(t, b))
	h.othersPull(t, content)
	if on := <-heard; !on {
		t.Fatal("listener heard yielding end first")
	}
	if y := h.eng.Yielding(); y.Blobs != 1 || testutil.ToFloat64(h.eng.metrics.yielding) != 1 {
		t.Errorf("yield %+v, gauge %v; want one blob, 1", y, testutil.ToFloat64(h.eng.metrics.yielding))
	}
	h.enqueue(b, 0)
	select {
	case got := <-h.svc.started:
		t.Fatalf("pull of %s started while yielding", got)
	case <-time.After(100 * time.Millisecond):
	}
	if len(h.svc.pulled()) != 1 {
		t.Fatalf("pulls %v, want a's only", h.svc.pulled())
	}
	releaseA()
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("a: %+v; a pull under way goes on while yielding", res)
	}

	content.writeForeign(time.Time{})
	h.until(t, "yielding ended", func() bool { return !h.eng.Yielding().On })
	if on := <-heard; on {
		t.Fatal("listener did not hear yielding end")
	}
	h.svc.waitStarted(t, key(t, b))
}

// TestYieldPause: in pause mode (and requeue, its former name) the pull
// under way is stopped when yielding starts, reported Canceled (no
// back-off, no failure), counted as paused, and pulled again once
// yielding ends.
func TestYieldPause(t *testing.T) {
	for _, mode := range []YieldMode{YieldPause, YieldRequeue} {
		t.Run(string(mode), func(t *testing.T) { testYieldPause(t, mode) })
	}
}

func testYieldPause(t *testing.T, mode YieldMode) {
	h, content, _ := yieldHarness(t, mode)
	a := "reg.example/app:v1"
	h.pulling(t, a)
	h.othersPull(t, content)
	res := h.result(t)
	if res.Class != pull.ClassCanceled || !strings.Contains(res.Message, "pull paused") || !res.RetryAt.IsZero() {
		t.Fatalf("result %+v, want a pause", res)
	}
	if s, _ := h.eng.Status(a); s.State != pull.StateQueued {
		t.Errorf("status %+v, want queued again", s)
	}
	if n := testutil.ToFloat64(h.eng.metrics.pauses); n != 1 {
		t.Errorf("pauses counted %v, want 1", n)
	}
	content.writeForeign(time.Time{})
	h.until(t, "yielding ended", func() bool { return !h.eng.Yielding().On })
	h.svc.waitStarted(t, key(t, a))
}

// TestYieldPauseKeepsItsBytes: before pausing a pull the engine holds,
// in a lease of its own, what the pull fetched: the layer it was writing
// (an ingest) and the blobs it had in full (its manifest, config and a
// finished layer), which containerd's garbage collection would otherwise
// remove once the cancelled pull's own lease ends.
func TestYieldPauseKeepsItsBytes(t *testing.T) {
	h, content, _ := yieldHarness(t, YieldPause)
	a := "reg.example/app:v1"
	h.pulling(t, a)
	content.write(l2Digest, 200)
	h.until(t, "the pull's manifest found", func() bool {
		s, _ := h.eng.Status(a)
		return s.Progress != nil && s.Progress.Known
	})
	h.othersPull(t, content)
	if res := h.result(t); res.Class != pull.ClassCanceled {
		t.Fatalf("result %+v, want a pause", res)
	}
	content.mu.Lock()
	defer content.mu.Unlock()
	if len(content.kept) != 1 {
		t.Fatalf("Keep called %d times, want once: %+v", len(content.kept), content.kept)
	}
	k := content.kept[0]
	if !strings.HasPrefix(k.id, "warmer-paused-") || !slices.Equal(k.refs, []string{"ingest-" + l2Digest}) {
		t.Errorf("kept lease %q ingests %q, want a warmer-paused- lease of the layer being written", k.id, k.refs)
	}
	for _, d := range []string{"sha256:m", cfgDigest, l1Digest, l2Digest} {
		if !slices.Contains(k.digests, d) {
			t.Errorf("kept blobs %q lack %s", k.digests, d)
		}
	}
}

// TestYieldPauseLimit: a pull paused maxPauses times is not paused again,
// so that a node where Pods start all the time still finishes its warm
// pulls: the next time the runtime pulls for someone else, it goes on.
func TestYieldPauseLimit(t *testing.T) {
	h, content, _ := yieldHarness(t, YieldPause)
	a := "reg.example/app:v1"
	release := h.pulling(t, a)
	for i := range maxPauses {
		h.othersPull(t, content)
		if res := h.result(t); res.Class != pull.ClassCanceled || !strings.Contains(res.Message, "pull paused") {
			t.Fatalf("yield %d: result %+v, want a pause", i+1, res)
		}
		content.writeForeign(time.Time{})
		h.until(t, "yielding ended", func() bool { return !h.eng.Yielding().On })
		h.svc.waitStarted(t, key(t, a))
	}
	h.othersPull(t, content)
	h.noResult(t)
	release()
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("result %+v; a pull paused %d times goes on", res, maxPauses)
	}
	if n := testutil.ToFloat64(h.eng.metrics.pauses); n != maxPauses {
		t.Errorf("pauses counted %v, want %d", n, maxPauses)
	}
}

// TestYieldHoldEnds: yielding that has lasted yieldHoldMax holds pulls
// back no longer (a node pulling for its Pods without a break must still
// warm); it still says it yields.
func TestYieldHoldEnds(t *testing.T) {
	h, content, _ := yieldHarness(t, YieldPause)
	b := "reg.example/other:v1"
	h.svc.block(key(t, b))
	content.writeForeign(h.clock.Now())
	h.enqueue(b, 0)
	h.until(t, "yielding", func() bool { return h.eng.Yielding().On })
	since := h.eng.Yielding().Since
	deadline := time.Now().Add(30 * time.Second)
	for started := false; !started; {
		if time.Now().After(deadline) {
			t.Fatalf("b not started after %v of yielding", h.clock.Since(since))
		}
		content.writeForeign(h.clock.Now())
		h.clock.Step(time.Second)
		select {
		case <-h.svc.started:
			started = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	if d := h.clock.Since(since); d < yieldHoldMax {
		t.Errorf("b started after %v of yielding, want at least %v", d, yieldHoldMax)
	}
	if !h.eng.Yielding().On {
		t.Error("yielding ended; want it still said")
	}
}

// TestYieldIgnoresOwnAndStale: the engine's own pull's blobs, a blob not
// written lately and a small one are nobody's pull to yield to.
func TestYieldIgnoresOwnAndStale(t *testing.T) {
	h, content, _ := yieldHarness(t, YieldWait)
	h.pulling(t, "reg.example/app:v1")
	content.mu.Lock()
	content.ingests[l1Digest] = 2 << 20 // a's own layer
	content.ingests["sha256:small"] = 100
	content.ingests[foreignBlob] = 2 << 20
	content.foreignAt[foreignBlob] = h.clock.Now().Add(-time.Minute) // stale
	content.mu.Unlock()
	for range 5 {
		h.reading(t)
	}
	if y := h.eng.Yielding(); y.On {
		t.Errorf("yielding %+v to the engine's own, a small and a stale blob", y)
	}
}

// TestYieldBeforeFirstPull: the runtime is already pulling for someone
// else when the first pull of a warm is asked for: it does not start
// (the watcher was not reading the store yet), and starts once the other
// pull is done.
func TestYieldBeforeFirstPull(t *testing.T) {
	h, content, heard := yieldHarness(t, YieldWait)
	a := "reg.example/app:v1"
	h.svc.block(key(t, a))
	content.writeForeign(h.clock.Now())
	h.enqueue(a, 0)
	if on := <-heard; !on || !h.eng.Yielding().On {
		t.Fatalf("not yielding before the first pull: %+v", h.eng.Yielding())
	}
	select {
	case got := <-h.svc.started:
		t.Fatalf("pull of %s started beside another pull", got)
	case <-time.After(100 * time.Millisecond):
	}
	if s, _ := h.eng.Status(a); s.State != pull.StateQueued {
		t.Errorf("status %+v, want queued", s)
	}
	content.writeForeign(time.Time{})
	h.until(t, "yielding ended", func() bool { return !h.eng.Yielding().On })
	h.svc.waitStarted(t, key(t, a))
}

// TestYieldPauseBeforeAPull: in pause mode, yielding that starts as a
// pull is about to start also pauses the pulls under way, as it does when
// the watcher finds the other pull.
func TestYieldPauseBeforeAPull(t *testing.T) {
	h, content, _ := yieldHarness(t, YieldPause)
	a, b := "reg.example/app:v1", "reg.example/other:v1"
	h.pulling(t, a)
	h.waitTimers(t, 2)
	h.reading(t) // a's manifest found: a start may look for others' pulls
	h.svc.block(key(t, b))
	content.writeForeign(h.clock.Now())
	h.enqueue(b, 0)
	res := h.result(t)
	if res.Ref != key(t, a) || res.Class != pull.ClassCanceled || !strings.Contains(res.Message, "pull paused") {
		t.Fatalf("result %+v, want a's pull paused", res)
	}
	if !h.eng.Yielding().On || len(h.svc.pulled()) != 1 {
		t.Errorf("yield %+v, pulls %v: want yielding, b not started", h.eng.Yielding(), h.svc.pulled())
	}
}
