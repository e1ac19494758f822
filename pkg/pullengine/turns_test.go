package pullengine

import (
	"fmt"
	"reflect"
	"testing"
)

// TestSharesTakeTurns queues one share's many pulls, then another's few,
// behind a running pull: within a priority the shares start in turn, each
// share's in arrival order; a higher priority still goes first, and a
// share that joins later waits behind no turn it did not use.
func TestSharesTakeTurns(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	release := h.svc.block(key(t, "first"))
	h.eng.Enqueue(h.ctx, Request{Image: "first", Share: "big"})
	h.svc.waitStarted(t, key(t, "first"))
	for _, r := range []Request{
		{Image: "big1", Share: "big"}, {Image: "big2", Share: "big"}, {Image: "big3", Share: "big"}, {Image: "big4", Share: "big"},
		{Image: "small1", Share: "small"}, {Image: "small2", Share: "small"},
		{Image: "urgent", Share: "big", Priority: 5},
		{Image: "node", Share: ""},
	} {
		h.eng.Enqueue(h.ctx, r)
	}
	release()
	for range 9 {
		h.result(t)
	}
	var want []string
	// big had its turn (first): small's and node-wide's first go ahead.
	for _, img := range []string{"first", "urgent", "small1", "node", "big1", "small2", "big2", "big3", "big4"} {
		want = append(want, key(t, img))
	}
	if got := h.svc.pulled(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pull order %q, want %q", got, want)
	}

	for range 8 { // the pulls after first
		<-h.svc.started
	}

	// All done: the turns start again, and a share that pulled much
	// before waits behind no one that did not.
	release = h.svc.block(key(t, "again"))
	h.eng.Enqueue(h.ctx, Request{Image: "again", Share: "small"})
	h.svc.waitStarted(t, key(t, "again"))
	h.eng.Enqueue(h.ctx, Request{Image: "small3", Share: "small"})
	h.eng.Enqueue(h.ctx, Request{Image: "big5", Share: "big"})
	h.eng.Enqueue(h.ctx, Request{Image: "small4", Share: "small"})
	release()
	for range 4 {
		h.result(t)
	}
	for _, img := range []string{"again", "big5", "small3", "small4"} {
		want = append(want, key(t, img))
	}
	if got := h.svc.pulled(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pull order %q, want %q", got, want)
	}
}

// TestTurnsForgotten checks that the turns kept do not grow with the
// shares that came and went: once the turns move on, a share that had
// nothing more queued is forgotten.
func TestTurnsForgotten(t *testing.T) {
	var tr turns
	for i := range 100 {
		tr.started(&job{turn: tr.give(0, fmt.Sprint("share", i))})
	}
	tr.started(&job{turn: tr.give(0, "share0")})
	if len(tr.next) != 1 {
		t.Errorf("%d shares remembered, want 1 (share0, whose turn is ahead)", len(tr.next))
	}
}
