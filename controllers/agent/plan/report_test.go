package plan

import (
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// TestReportDue walks a warm through the write pacing: progress waits the
// interval from its first change (a warm shorter than that is written
// once, as its result), a settled status goes out at once, a status equal
// to the report is never written, and after a write the next progress
// waits a full interval again.
func TestReportDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Report
	r.Found(warmv1.NodeWarmStatus{})
	pulling := func(n int32) warmv1.NodeWarmStatus {
		return warmv1.NodeWarmStatus{Desired: 10, Present: 10 - n, Pulling: n}
	}
	done := warmv1.NodeWarmStatus{Desired: 10, Present: 10}
	steps := []struct {
		name   string
		at     time.Duration
		status warmv1.NodeWarmStatus
		write  bool // the caller writes when due
		due    bool
		wait   time.Duration
	}{
		{"pulls start: progress waits", 0, pulling(10), false, false, 2 * time.Second},
		{"more progress within the interval", 1500 * time.Millisecond, pulling(4), false, false, 500 * time.Millisecond},
		{"the warm ends: its result at once", 1800 * time.Millisecond, done, true, true, 0},
		{"nothing new", 2 * time.Second, done, false, false, 0},
		{"a new warm starts right after", 2100 * time.Millisecond, pulling(10), false, false, 2 * time.Second},
		{"progress an interval after its first change", 4100 * time.Millisecond, pulling(9), true, true, 0},
		{"the next progress waits a full interval from its change", 4200 * time.Millisecond, pulling(8), false, false, 2 * time.Second},
		{"back to what was written: nothing to write", 4300 * time.Millisecond, pulling(9), false, false, 0},
		{"a change again starts its own interval", 4400 * time.Millisecond, pulling(7), false, false, 2 * time.Second},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		wait, due := r.Due(s.status, now, 2*time.Second)
		if due != s.due || wait != s.wait {
			t.Fatalf("%s: Due = %v, %v; want %v, %v", s.name, wait, due, s.wait, s.due)
		}
		if s.write {
			r.Wrote(s.status, now)
		}
	}
}
