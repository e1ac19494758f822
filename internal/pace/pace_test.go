package pace

import (
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		result bool
		last   time.Time
		now    time.Time
		want   time.Duration
	}{
		{"a result goes at once", true, t0, t0, 0},
		{"progress waits out the interval", false, t0, t0.Add(300 * time.Millisecond), 700 * time.Millisecond},
		{"progress after the interval goes", false, t0, t0.Add(time.Second), 0},
		{"progress long after goes", false, t0, t0.Add(time.Hour), 0},
		{"never written goes", false, time.Time{}, t0, 0},
	}
	for _, tt := range tests {
		if got := Wait(tt.result, tt.last, tt.now, time.Second); got != tt.want {
			t.Errorf("%s: Wait = %v, want %v", tt.name, got, tt.want)
		}
	}
}
