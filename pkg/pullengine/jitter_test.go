package pullengine

import (
	"math/rand/v2"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

// outageRetries simulates a fleet of nodes, each with its own back-off,
// failing to pull one image from the start of a registry outage until it
// ends, and returns when each node retries first after the end. It works on
// the back-off alone, with a fake clock: a thousand nodes in one outage is
// not something real parts produce on demand on one machine.
func outageRetries(t *testing.T, nodes int, jitter float64, outage time.Duration) []time.Time {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testclock.NewFakeClock(start)
	end := start.Add(outage)
	first := make([]time.Time, nodes)
	for i := range nodes {
		b := newBackoff(DefaultBackOffInitial, DefaultBackOffMax, jitter, clk)
		b.rand = rand.New(rand.NewPCG(7, uint64(i))).Float64
		clk.SetTime(start)
		for n := 1; ; n++ {
			now := clk.Now()
			until := b.failed("img", 0)
			// No node ever waits longer than the kubelet's schedule, nor
			// less than the jitter allows.
			kubelet := b.b.Get("img")
			if wait := until.Sub(now); wait > kubelet || wait < time.Duration((1-jitter)*float64(kubelet))-time.Nanosecond {
				t.Fatalf("node %d, failure %d: wait %v outside [%v, %v]", i, n, wait, time.Duration((1-jitter)*float64(kubelet)), kubelet)
			}
			clk.SetTime(until)
			if _, backingOff := b.retryAt("img"); backingOff {
				t.Fatalf("node %d still backing off at its retry time", i)
			}
			if !until.Before(end) {
				first[i] = until
				break
			}
		}
	}
	return first
}

// busiestSecond is the most retries that land within one second.
func busiestSecond(retries []time.Time) int {
	perSecond := map[int64]int{}
	most := 0
	for _, r := range retries {
		s := r.Unix()
		perSecond[s]++
		most = max(most, perSecond[s])
	}
	return most
}

func TestJitterSpreadsRetriesAfterAnOutage(t *testing.T) {
	const nodes = 1000
	outage := 15 * time.Minute

	// Without jitter the whole fleet comes back in the same instant.
	if got := busiestSecond(outageRetries(t, nodes, 0, outage)); got != nodes {
		t.Fatalf("without jitter %d of %d nodes retried in the busiest second, want all", got, nodes)
	}

	retries := outageRetries(t, nodes, DefaultBackOffJitter, outage)
	busiest := busiestSecond(retries)
	first, last := retries[0], retries[0]
	for _, r := range retries {
		first, last = minTime(first, r), maxTime(last, r)
	}
	t.Logf("jitter %.1f: %d nodes retry over %v after a %v outage, at most %d in one second",
		DefaultBackOffJitter, nodes, last.Sub(first).Round(time.Second), outage, busiest)
	if busiest > nodes/20 {
		t.Errorf("%d of %d nodes retried in one second; want at most %d (5%%)", busiest, nodes, nodes/20)
	}
	if spread := last.Sub(first); spread < DefaultBackOffMax/2 {
		t.Errorf("retries spread over %v, want at least half the %v cap", spread, DefaultBackOffMax)
	}
}

func TestJitterClamped(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	for _, c := range []struct{ in, want float64 }{{-1, 0}, {0.3, 0.3}, {2, MaxBackOffJitter}} {
		if got := newBackoff(time.Second, time.Minute, c.in, clk).jitter; got != c.want {
			t.Errorf("jitter %v clamped to %v, want %v", c.in, got, c.want)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
