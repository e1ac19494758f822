package pullengine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// hold starts a pull of image for share that hangs until the test ends,
// then moves the clock a second on, so that the pulls' start times differ.
func (h *harness) hold(t *testing.T, image, share string, priority int32) {
	t.Helper()
	t.Cleanup(h.svc.block(key(t, image)))
	h.eng.Enqueue(h.ctx, Request{Image: image, Share: share, Priority: priority})
	h.svc.waitStarted(t, key(t, image))
	h.clock.Step(time.Second)
}

// sharePaused waits for image's pull to end paused for another share.
func (h *harness) sharePaused(t *testing.T, image string) {
	t.Helper()
	res := h.result(t)
	if res.Ref != key(t, image) || res.Class != pull.ClassCanceled || !strings.Contains(res.Message, "fair number of pull slots") || !res.RetryAt.IsZero() {
		t.Fatalf("result %+v, want %s paused for another share", res, image)
	}
}

// noStart checks that no pull starts for a short while.
func (h *harness) noStart(t *testing.T) {
	t.Helper()
	select {
	case ref := <-h.svc.started:
		t.Fatalf("pull of %s started, want none", ref)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestShareAboveFairPaused: a share holds both slots with pulls that do
// not end (a trickling registry); another share's pull arrives. The first
// share's most recently started pull is paused at once, the other's pull
// takes its slot, and the paused one is queued behind it: it resumes when
// that ends, not before.
func TestShareAboveFairPaused(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 2})
	h.hold(t, "hog1", "hog", 0)
	h.hold(t, "hog2", "hog", 0)
	releaseV := h.svc.block(key(t, "victim"))
	h.eng.Enqueue(h.ctx, Request{Image: "victim", Share: "victim"})
	h.sharePaused(t, "hog2")
	h.svc.waitStarted(t, key(t, "victim"))
	if s, _ := h.eng.Status("hog2"); s.State != pull.StateQueued {
		t.Errorf("hog2: status %+v after its pause, want queued again", s)
	}
	if s, _ := h.eng.Status("hog1"); s.State != pull.StatePulling {
		t.Errorf("hog1: %+v, want still pulling: the share keeps its fair slot", s)
	}
	if n := testutil.ToFloat64(h.eng.metrics.sharePauses); n != 1 {
		t.Errorf("share pauses counted %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.eng.metrics.pauses); n != 0 {
		t.Errorf("yield pauses counted %v, want 0", n)
	}
	h.noStart(t) // hog2 waits behind victim
	releaseV()
	if res := h.result(t); res.Ref != key(t, "victim") || !res.Succeeded() {
		t.Fatalf("result %+v, want victim pulled", res)
	}
	h.svc.waitStarted(t, key(t, "hog2"))
}

// TestShareFairUnchanged: with one share (a namespace's, or the
// node-wide one), with shares each at their fair number, and with the
// waiting pull at a lower priority than the pulls holding the slots, no
// pull is paused.
func TestShareFairUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holders [][2]string // image, share
		prio    int32       // of the holders
		waiter  Request
	}{
		{"one share", [][2]string{{"a1", "a"}, {"a2", "a"}}, 0, Request{Image: "a3", Share: "a"}},
		{"node-wide alone", [][2]string{{"n1", ""}, {"n2", ""}}, 0, Request{Image: "n3"}},
		{"each at its fair number", [][2]string{{"a1", "a"}, {"b1", "b"}}, 0, Request{Image: "a2", Share: "a"}},
		{"a higher priority holds", [][2]string{{"a1", "a"}, {"a2", "a"}}, 5, Request{Image: "b1", Share: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{MaxParallelPulls: 2})
			for _, hd := range tc.holders {
				h.hold(t, hd[0], hd[1], tc.prio)
			}
			h.eng.Enqueue(h.ctx, tc.waiter)
			h.clock.Step(2 * shareRunMin)
			h.noResult(t)
			h.noStart(t)
			if n := testutil.ToFloat64(h.eng.metrics.sharePauses); n != 0 {
				t.Errorf("share pauses counted %v, want 0", n)
			}
		})
	}
}

// TestShareSerialTakesTurns: with serial pulls each share's fair number
// is the one slot; a share with none takes the slot of another's pull
// only once that has run shareRunMin, and a pull is paused so at most
// maxSharePauses times: then it goes on while others wait.
func TestShareSerialTakesTurns(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	h.hold(t, "hog", "hog", 0)
	for i := range maxSharePauses + 1 {
		waiter := "victim" + string(rune('a'+i))
		h.eng.Enqueue(h.ctx, Request{Image: waiter, Share: "victim"})
		h.clock.Step(shareRunMin - 2*time.Second) // hog ran a second before
		h.noResult(t)
		h.clock.Step(time.Second)
		if i == maxSharePauses {
			h.noResult(t)
			break
		}
		h.sharePaused(t, "hog")
		h.svc.waitStarted(t, key(t, waiter))
		if res := h.result(t); res.Ref != key(t, waiter) || !res.Succeeded() {
			t.Fatalf("result %+v, want %s pulled", res, waiter)
		}
		h.svc.waitStarted(t, key(t, "hog"))
		h.clock.Step(time.Second)
	}
	if n := testutil.ToFloat64(h.eng.metrics.sharePauses); n != maxSharePauses {
		t.Errorf("share pauses counted %v, want %d", n, maxSharePauses)
	}
	if s, _ := h.eng.Status("hog"); s.State != pull.StatePulling {
		t.Errorf("hog: %+v, want pulling past its last pause", s)
	}
}

// TestTurnsAfter: a paused pull's turn is its share's next, and never
// before the waiting pull's.
func TestTurnsAfter(t *testing.T) {
	var tr turns
	tr.give(0, "hog")
	if n := tr.after(0, "hog", 7); n != 7 {
		t.Errorf("after(7) = %d, want 7", n)
	}
	if n := tr.give(0, "hog"); n != 8 {
		t.Errorf("next turn %d, want 8", n)
	}
	if n := tr.after(0, "hog", 2); n != 9 {
		t.Errorf("after(2) = %d, want 9 (the share's next)", n)
	}
}

// TestSharePausedOnce: a share that holds both slots gives one up to
// another share's first pull; when that ends, the other share's next
// pull, asked for since, starts before the paused one resumes: the paused
// pull is not started again only to be paused again.
func TestSharePausedOnce(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 2})
	h.hold(t, "hog1", "hog", 0)
	h.hold(t, "hog2", "hog", 0)
	releaseV1 := h.svc.block(key(t, "victim1"))
	h.eng.Enqueue(h.ctx, Request{Image: "victim1", Share: "victim"})
	h.sharePaused(t, "hog2")
	h.svc.waitStarted(t, key(t, "victim1"))
	releaseV2 := h.svc.block(key(t, "victim2"))
	h.eng.Enqueue(h.ctx, Request{Image: "victim2", Share: "victim"})
	releaseV1()
	if res := h.result(t); res.Ref != key(t, "victim1") || !res.Succeeded() {
		t.Fatalf("result %+v, want victim1 pulled", res)
	}
	h.svc.waitStarted(t, key(t, "victim2"))
	h.noResult(t)
	releaseV2()
	if res := h.result(t); res.Ref != key(t, "victim2") || !res.Succeeded() {
		t.Fatalf("result %+v, want victim2 pulled", res)
	}
	h.svc.waitStarted(t, key(t, "hog2"))
	if n := testutil.ToFloat64(h.eng.metrics.sharePauses); n != 1 {
		t.Errorf("share pauses counted %v, want 1", n)
	}
}
