package pullengine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// leaseContent is the fake store with the runtime's pulls for others:
// when each started (their leases).
type leaseContent struct {
	*fakeContent
	mu     sync.Mutex
	others []time.Time
}

var _ OthersPulls = (*leaseContent)(nil)

func (l *leaseContent) OthersPulls(context.Context) ([]time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.others...), nil
}

// set has the runtime pull for others, started at each of at (none
// without).
func (l *leaseContent) set(at ...time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.others = at
}

// leaseHarness is yieldHarness over a store that shows others' pulls.
func leaseHarness(t *testing.T, mode YieldMode) (*harness, *leaseContent) {
	content := &leaseContent{fakeContent: newFakeContent(time.Unix(1_000_000, 0))}
	h := newHarness(t, Options{Content: content, Yield: mode})
	return h, content
}

// TestYieldToOthersPullByItsLease: another client's pull that has written
// no blob yet (on containerd 2.x it waits for one of the three downloads
// the runtime runs at a time, which the warm pulls hold) pauses the pull
// under way; yielding lasts, with no blob written, while that pull goes
// on (it unpacks), and ends with it.
func TestYieldToOthersPullByItsLease(t *testing.T) {
	h, content := leaseHarness(t, YieldPause)
	a := "reg.example/app:v1"
	h.pulling(t, a)
	content.set(h.clock.Now().Add(-time.Second))
	h.until(t, "yielding", func() bool { return h.eng.Yielding().On })
	if res := h.result(t); res.Class != pull.ClassCanceled || !strings.Contains(res.Message, "pull paused") {
		t.Fatalf("result %+v, want a pause", res)
	}
	for range 3 {
		h.clock.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	if !h.eng.Yielding().On || len(h.svc.pulled()) != 1 {
		t.Fatalf("yield %+v, pulls %v: want yielding while the other pull goes on, a not started", h.eng.Yielding(), h.svc.pulled())
	}
	content.set()
	h.until(t, "yielding ended", func() bool { return !h.eng.Yielding().On })
	h.svc.waitStarted(t, key(t, a))
}

// TestYieldIgnoresStaleAndFreshLeases: a lease older than pullLeaseFor
// with no blobs written for others (one left by a client that stopped),
// and one younger than pullSettle (a container's creation holds one for
// milliseconds), are no pull to yield to.
func TestYieldIgnoresStaleAndFreshLeases(t *testing.T) {
	h, content := leaseHarness(t, YieldPause)
	h.pulling(t, "reg.example/app:v1")
	for range 5 {
		next := h.clock.Now().Add(time.Second) // the next look's time
		content.set(next.Add(-pullLeaseFor-time.Second), next.Add(-pullSettle/2))
		h.clock.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	if y := h.eng.Yielding(); y.On {
		t.Errorf("yielding %+v to a stale and a fresh lease", y)
	}
	h.noResult(t)
}
