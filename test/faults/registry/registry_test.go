package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/test/testbed"

	"github.com/warmer-dev/warmer/test/testbed/faults"
)

const node = "node-1"

// TestRegistryFaults runs one agent against a registry behind a fault
// proxy. Each case has its own proxy, images and ImageWarm.
func TestRegistryFaults(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: agentSettings(
		"--pull-progress-interval="+bytesInterval.String(), "--pull-stall-timeout="+stallTimeout.String())})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "origin"})

	t.Run("registry stopped mid-pull then back", func(t *testing.T) { testStoppedMidPull(t, f) })
	t.Run("500 answers", func(t *testing.T) {
		testAnswers(t, f, reg, "five", faults.Fault{Mode: faults.Fault500}, "RegistryUnavailable")
	})
	t.Run("429 answers with Retry-After", func(t *testing.T) {
		testAnswers(t, f, reg, "rate", faults.Fault{Mode: faults.Fault429, RetryAfter: 10 * time.Second}, "RateLimited")
	})
	t.Run("connection resets", func(t *testing.T) { testResets(t, f, reg) })
	t.Run("slow bodies", func(t *testing.T) { testSlow(t, f, reg) })
	t.Run("progress of a slowed pull", func(t *testing.T) { testProgress(t, f, reg) })
	t.Run("stalled pull", func(t *testing.T) { testStalled(t, f, reg) })
}

// TestProgressOnContainerd2 runs the progress and stall subtests of
// TestRegistryFaults on the real node's containerd 2.x (without a
// kubelet) rather than the bed's 1.6: the agent reads a pull's bytes from
// the runtime's content store, whose ingests each version keeps its own way.
func TestProgressOnContainerd2(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{
		Agent: agentSettings("--pull-progress-interval="+bytesInterval.String(), "--pull-stall-timeout="+stallTimeout.String()),
		Containerd: func(string) []testbed.ContainerdOption {
			return []testbed.ContainerdOption{testbed.WithContainerd2(t)}
		},
	})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "origin2"})
	t.Run("progress of a slowed pull", func(t *testing.T) { testProgress(t, f, reg) })
	t.Run("stalled pull", func(t *testing.T) { testStalled(t, f, reg) })
}

// testStoppedMidPull stops the registry while a layer is on its way. The
// proxy only slows the body, so that the pull is still under way when the
// registry goes; while it is down the proxy answers 502, as a load
// balancer in front of a dead registry does.
func testStoppedMidPull(t *testing.T, f *testbed.Fleet) {
	flaky := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "flaky"})
	p := faults.StartFaultProxy(t, flaky.Host)
	// Bigger than loopback's socket buffers, so the registry is still
	// writing when it is stopped.
	ref := via(flaky.PushRandom(t, "flaky/app:v1", testbed.ImageOptions{LayerSize: 24 * testbed.MB}), flaky, p)
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: testbed.MB})
	warm(t, f, "stopped", 0, ref)
	testbed.Eventually(t, 60*time.Second, "a layer under way", func() error {
		if p.Count(faults.FaultSlow) < 2 { // config and layer
			return errf("%d slow requests", p.Count(faults.FaultSlow))
		}
		return nil
	})
	time.Sleep(time.Second)
	flaky.Stop()
	got := waitReason(t, f, node, ref, "RegistryUnavailable", 60*time.Second)
	first, err := failedEvent(t, f, "stopped", "RegistryUnavailable")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first failure: %s; status message now: %s", first, got.Message)
	if f.Nodes[node].Present(t, ref) {
		t.Fatalf("%s present although its registry stopped mid-pull", ref)
	}
	flaky.Start()
	p.Pass()
	waitPresent(t, f, node, ref, recovered)
}

// testAnswers has the proxy answer every request with fault, checks the
// reason, the Failed event and the back-off between attempts, then lets
// requests through and waits for the image.
func testAnswers(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, name string, fault faults.Fault, reason string) {
	p := faults.StartFaultProxy(t, reg.Host)
	ref := via(reg.PushRandom(t, name+"/app:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, p)
	p.Set(fault)
	warm(t, f, name, 0, ref)
	got := waitReason(t, f, node, ref, reason, 60*time.Second)
	t.Logf("status: %s %s: %s", got.State, got.Reason, got.Message)
	if _, err := failedEvent(t, f, name, reason); err != nil {
		t.Error(err)
	}
	// Five attempts: four gaps, of 1, 2, 4 and 4 s with the settings.
	starts, sizes := waitAttempts(t, p, 5)
	t.Logf("requests per attempt: %v", sizes)
	checkBackOff(t, starts)
	p.Pass()
	waitPresent(t, f, node, ref, recovered)
}

// testResets cuts connections two ways: before a manifest answer, and in
// the middle of a layer.
func testResets(t *testing.T, f *testbed.Fleet, reg *testbed.Registry) {
	early := faults.StartFaultProxy(t, reg.Host)
	mid := faults.StartFaultProxy(t, reg.Host)
	earlyRef := via(reg.PushRandom(t, "reset/early:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, early)
	midRef := via(reg.PushRandom(t, "reset/mid:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, mid)
	early.Set(faults.Fault{Mode: faults.FaultReset, Paths: faults.ManifestPaths})
	mid.Set(faults.Fault{Mode: faults.FaultReset, Paths: faults.BlobPaths, ResetAfter: 64 << 10})
	warm(t, f, "reset", 0, earlyRef, midRef)
	for _, ref := range []string{earlyRef, midRef} {
		got := waitReason(t, f, node, ref, "RegistryUnavailable", 60*time.Second)
		// The agent's log has "connection reset"; the status says only the
		// class's sentence (pullengine.StatusMessage).
		if !strings.Contains(got.Message, "the connection broke") || strings.Contains(got.Message, "reset") {
			t.Errorf("%s: message %q: want the connection broke, not the runtime's words", ref, got.Message)
		}
	}
	if early.Count(faults.FaultReset) == 0 || mid.Count(faults.FaultReset) == 0 {
		t.Fatalf("resets: %d early, %d mid-body", early.Count(faults.FaultReset), mid.Count(faults.FaultReset))
	}
	early.Pass()
	mid.Pass()
	waitPresent(t, f, node, earlyRef, recovered)
	waitPresent(t, f, node, midRef, recovered)
}

// testSlow pulls two images over slow bodies: one under a pullTimeout that
// it cannot meet, one without a timeout of its own (the agent's default is
// 30 minutes), which arrives, late.
func testSlow(t *testing.T, f *testbed.Fleet, reg *testbed.Registry) {
	p := faults.StartFaultProxy(t, reg.Host)
	const (
		rate        = 256 << 10
		pullTimeout = 10 * time.Second
	)
	// The big image needs 80 s at the rate, far beyond its pullTimeout;
	// the small one needs 4 s.
	big := via(reg.PushRandom(t, "slow/big:v1", testbed.ImageOptions{LayerSize: 20 * testbed.MB}), reg, p)
	small := via(reg.PushRandom(t, "slow/small:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, p)
	smallTime := time.Duration(testbed.MB) * time.Second / rate
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: rate})
	start := time.Now()
	warm(t, f, "slow-timeout", pullTimeout, big)
	warm(t, f, "slow-ok", 0, small)

	waitPresent(t, f, node, small, smallTime+testbed.SettleMargin)
	// Anything much quicker than the rate allows was not slowed.
	if d := time.Since(start); d < smallTime*3/4 {
		t.Errorf("the slow image arrived after %v only; at %d B/s it takes %v", d, rate, smallTime)
	}
	got := waitReason(t, f, node, big, "Timeout", pullTimeout+testbed.SettleMargin)
	if d := time.Since(start); d < pullTimeout {
		t.Errorf("Timeout after %v, before the %v pullTimeout", d, pullTimeout)
	}
	t.Logf("status: %s %s: %s", got.State, got.Reason, got.Message)
	if f.Nodes[node].Present(t, big) {
		t.Errorf("%s present after its pull timed out", big)
	}
}
