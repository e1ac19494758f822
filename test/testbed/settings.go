package testbed

import (
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// Margins for a shared 2-core machine, where other test binaries compete
// for the CPU (timings there run two to three times those of an idle
// machine).
const (
	// BusyMargin is how late one timed step may come: a timer that fires
	// late, a process scheduled late, a write queued behind others. Timing
	// assertions (a retry no later than its back-off plus this) use it.
	BusyMargin = 3 * time.Second
	// SettleMargin is what a wait for an outcome adds to the configured
	// periods it spans: API round trips, rate-limited status writes and
	// the pull itself, under load. It bounds no timing claim, so it is
	// generous.
	SettleMargin = 30 * time.Second
)

// AgentSettings are the timings a test fleet's agents run with. Flags
// renders them as the agent's command line, so that a test derives its
// waits from the values the agent runs with instead of repeating them. A
// zero duration passes no flag: the agent's own default applies, and the
// methods that need the value must not be used.
type AgentSettings struct {
	// Resync is --resync-period: the longest time between two passes.
	Resync time.Duration
	// BackOffInitial and BackOffMax are --image-pull-backoff-initial and
	// --image-pull-backoff-max.
	BackOffInitial, BackOffMax time.Duration
	// ExactBackOff passes --image-pull-backoff-jitter=0, for tests that
	// check the kubelet's schedule to the second; otherwise each wait may
	// be up to pullengine.DefaultBackOffJitter shorter (EarliestBackOff).
	ExactBackOff bool
	// ProgressInterval is --status-progress-interval.
	ProgressInterval time.Duration
	// RetryInterval is --status-retry-interval.
	RetryInterval time.Duration
	// DiskThresholdPercent is --image-fs-threshold-percent; 0 passes none
	// (the agent's 80).
	DiskThresholdPercent int
	// LogLevel is --zap-log-level; empty passes none.
	LogLevel string
	// Extra flags follow the rendered ones (a later flag wins).
	Extra []string
}

// DefaultAgent are the agent settings of a test fleet: a short resync so
// drift is caught quickly, and a back-off long enough that "fixed without
// waiting out the back-off" can be told apart from waiting it out.
var DefaultAgent = AgentSettings{
	Resync:           3 * time.Second,
	BackOffInitial:   30 * time.Second,
	BackOffMax:       60 * time.Second,
	ProgressInterval: 500 * time.Millisecond,
	// Retries are folded as the agent folds them, over a time the tests
	// that wait for an image's attempts can afford.
	RetryInterval: 5 * time.Second,
	// The bed's image filesystems are folders on the machine's own disk,
	// which builds and caches share and often fill past the agent's 80%:
	// its fill says nothing about warmer, so the guard only trips on a
	// disk all but full. The disk tests set their own threshold.
	DiskThresholdPercent: 99,
	LogLevel:             "debug",
}

// DefaultAgentFlags are DefaultAgent's flags.
var DefaultAgentFlags = DefaultAgent.Flags()

// Flags renders the settings as the agent's flags.
func (s AgentSettings) Flags() []string {
	out := durationFlags([]durationFlag{
		{"resync-period", s.Resync},
		{"image-pull-backoff-initial", s.BackOffInitial},
		{"image-pull-backoff-max", s.BackOffMax},
		{"status-progress-interval", s.ProgressInterval},
		{"status-retry-interval", s.RetryInterval},
	})
	if s.ExactBackOff {
		out = append(out, "--image-pull-backoff-jitter=0")
	}
	if s.DiskThresholdPercent > 0 {
		out = append(out, fmt.Sprintf("--image-fs-threshold-percent=%d", s.DiskThresholdPercent))
	}
	if s.LogLevel != "" {
		out = append(out, "--zap-log-level="+s.LogLevel)
	}
	return append(out, s.Extra...)
}

// With returns a copy of the settings with more flags.
func (s AgentSettings) With(extra ...string) AgentSettings {
	s.Extra = append(append([]string{}, s.Extra...), extra...)
	return s
}

// BackOff is the longest wait the agent sets after an image's failures-th
// failure in a row: BackOffInitial, doubling with each failure up to
// BackOffMax (client-go's flowcontrol.Backoff); jitter only shortens it.
func (s AgentSettings) BackOff(failures int) time.Duration {
	d := s.BackOffInitial
	for i := 1; i < failures && d < s.BackOffMax; i++ {
		d *= 2
	}
	return min(d, s.BackOffMax)
}

// EarliestBackOff is the shortest wait the agent may set after an image's
// failures-th failure in a row: BackOff less the most jitter takes off.
func (s AgentSettings) EarliestBackOff(failures int) time.Duration {
	d := s.BackOff(failures)
	if s.ExactBackOff {
		return d
	}
	return d - time.Duration(pullengine.DefaultBackOffJitter*float64(d))
}

// MaxAttempts is the most pulls of one failing image the back-off lets
// start within d of the first: each attempt comes at least the earliest
// back-off after the previous one failed.
func (s AgentSettings) MaxAttempts(d time.Duration) int {
	n, at := 1, s.EarliestBackOff(1)
	for at <= d {
		n++
		at += s.EarliestBackOff(n)
	}
	return n
}

// ControllerSettings are the timings a test fleet's controller runs with;
// Flags renders them.
type ControllerSettings struct {
	// MinStatusInterval is --min-status-interval.
	MinStatusInterval time.Duration
	// LeaseDuration, RenewDeadline and RetryPeriod are the
	// --leader-elect-* flags.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// PullSecretResync is --pull-secret-resync: how soon a changed pull
	// secret reaches its copy, which the agents read.
	PullSecretResync time.Duration
}

// DefaultController are the controller settings of a test fleet: a short
// status interval so tests see status soon, pull secrets copied again
// every 2 s so a fixed secret is seen within a test's patience, and the
// binary's own lease timings (cmd/warmer), which docs/reliability.md
// describes.
var DefaultController = ControllerSettings{
	MinStatusInterval: 300 * time.Millisecond,
	LeaseDuration:     60 * time.Second,
	RenewDeadline:     40 * time.Second,
	RetryPeriod:       5 * time.Second,
	PullSecretResync:  2 * time.Second,
}

// Flags renders the settings as the controller's flags.
func (s ControllerSettings) Flags() []string {
	return durationFlags([]durationFlag{
		{"min-status-interval", s.MinStatusInterval},
		{"leader-elect-lease-duration", s.LeaseDuration},
		{"leader-elect-renew-deadline", s.RenewDeadline},
		{"leader-elect-retry-period", s.RetryPeriod},
		{"pull-secret-resync", s.PullSecretResync},
	})
}

// durationFlag is one duration setting and its flag's name.
type durationFlag struct {
	name string
	d    time.Duration
}

// durationFlags renders the settings that are set (non-zero) as flags.
func durationFlags(flags []durationFlag) []string {
	var out []string
	for _, f := range flags {
		if f.d > 0 {
			out = append(out, "--"+f.name+"="+f.d.String())
		}
	}
	return out
}

// TakeOver is the longest a controller started while a killed leader's
// Lease is still held waits before it leads: client-go counts the lease
// from when this candidate first read the Lease, so a whole LeaseDuration
// from its start, and then tries again every RetryPeriod with up to
// leaderelection.JitterFactor of jitter.
func (s ControllerSettings) TakeOver() time.Duration {
	return s.LeaseDuration + time.Duration((1+leaderelection.JitterFactor)*float64(s.RetryPeriod))
}
