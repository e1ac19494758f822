package testbed

import (
	"slices"
	"testing"
	"time"
)

func TestAgentSettingsFlags(t *testing.T) {
	want := []string{"--resync-period=3s", "--image-pull-backoff-initial=30s", "--image-pull-backoff-max=1m0s",
		"--status-progress-interval=500ms", "--status-retry-interval=5s", "--image-fs-threshold-percent=99", "--zap-log-level=debug"}
	if got := DefaultAgent.Flags(); !slices.Equal(got, want) {
		t.Errorf("DefaultAgent.Flags() = %q, want %q", got, want)
	}
	// Zero values pass nothing: the agent's defaults apply.
	if got := (AgentSettings{LogLevel: "info"}).Flags(); !slices.Equal(got, []string{"--zap-log-level=info"}) {
		t.Errorf("LogLevel only: %q", got)
	}
	with := DefaultAgent.With("--image-fs-threshold-percent=50")
	if got := with.Flags(); got[len(got)-1] != "--image-fs-threshold-percent=50" || len(DefaultAgent.Extra) != 0 {
		t.Errorf("With: %q, and DefaultAgent.Extra %q", got, DefaultAgent.Extra)
	}
}

func TestAgentSettingsBackOff(t *testing.T) {
	s := AgentSettings{BackOffInitial: time.Second, BackOffMax: 4 * time.Second, ExactBackOff: true}
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, s.BackOff(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("back-offs %v, want %v", got, want)
	}
	// Attempts at 0, 1, 3, 7, 11, 15 s.
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {999 * time.Millisecond, 1}, {time.Second, 2}, {3 * time.Second, 3}, {6 * time.Second, 3}, {7 * time.Second, 4}, {15 * time.Second, 6}} {
		if got := s.MaxAttempts(c.d); got != c.want {
			t.Errorf("MaxAttempts(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	// With jitter, attempts may come at 0, 0.8, 2.4, 5.6 s.
	s.ExactBackOff = false
	if got := s.EarliestBackOff(2); got != 1600*time.Millisecond {
		t.Errorf("EarliestBackOff(2) = %v, want 1.6s", got)
	}
	if got := s.MaxAttempts(5600 * time.Millisecond); got != 4 {
		t.Errorf("MaxAttempts(5.6s) with jitter = %d, want 4", got)
	}
	// A cap below the start holds from the first failure.
	if got := (AgentSettings{BackOffInitial: 10 * time.Second, BackOffMax: 5 * time.Second}).BackOff(1); got != 5*time.Second {
		t.Errorf("capped first back-off %v", got)
	}
}

func TestControllerSettings(t *testing.T) {
	want := []string{"--min-status-interval=300ms", "--leader-elect-lease-duration=1m0s",
		"--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s", "--pull-secret-resync=2s"}
	if got := DefaultController.Flags(); !slices.Equal(got, want) {
		t.Errorf("DefaultController.Flags() = %q, want %q", got, want)
	}
	// 60 s of lease, then a retry within 5 s plus 120 % jitter.
	if got := DefaultController.TakeOver(); got != 71*time.Second {
		t.Errorf("TakeOver() = %v, want 1m11s", got)
	}
}
