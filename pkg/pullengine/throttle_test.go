package pullengine

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestThrottleNoOpAtZeroQPS(t *testing.T) {
	svc := newFakeService()
	if got := Throttle(svc, 0, 10, testingclock.NewFakeClock(time.Now())); got != ImageService(svc) {
		t.Fatal("QPS 0 should return the service itself")
	}
}

func TestThrottle(t *testing.T) {
	svc := newFakeService()
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	th := Throttle(svc, 1, 2, clk) // one pull a second, bursts of two
	done := make(chan error, 4)
	pull := func(ctx context.Context, ref string) {
		go func() { _, err := th.PullImage(ctx, ref, nil); done <- err }()
	}
	pull(context.Background(), "a")
	pull(context.Background(), "b")
	for range 2 { // the burst goes through at once
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	pull(context.Background(), "c")
	ctx, cancel := context.WithCancel(context.Background())
	pull(ctx, "d")
	waitWaiters(t, clk, 2)
	if n := len(svc.pulled()); n != 2 {
		t.Fatalf("%d pulls before any token was due, want 2", n)
	}
	cancel() // d gives up waiting
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := svc.pulled(); len(got) != 3 || got[2] != "c" {
		t.Fatalf("pulls %q, want c third and d never", got)
	}
	// Other calls are not throttled.
	if _, err := th.ListImages(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func waitWaiters(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", clk.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEngineThrottled(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 5, RegistryQPS: 1, RegistryBurst: 1})
	h.enqueue("a", 0)
	h.enqueue("b", 0)
	h.result(t)
	h.waitTimers(t, 2) // b's pull timeout and its wait for a token
	h.noResult(t)
	h.clock.Step(time.Second)
	h.result(t)
}
