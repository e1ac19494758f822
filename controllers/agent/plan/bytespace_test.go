package plan

import (
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func TestBytesPace(t *testing.T) {
	const slowest = 30 * time.Second
	for _, c := range []struct {
		pulling int64
		slowest time.Duration
		want    time.Duration
	}{
		{0, slowest, FastBytesPace},
		{1, slowest, FastBytesPace},
		{20, slowest, FastBytesPace},
		{21, slowest, 2100 * time.Millisecond},
		{100, slowest, 10 * time.Second},
		{300, slowest, slowest},
		{5000, slowest, slowest},
		{-3, slowest, FastBytesPace},
		{5, 0, 0},
		{5, time.Second, time.Second},
	} {
		if got := BytesPace(c.pulling, c.slowest); got != c.want {
			t.Errorf("BytesPace(%d, %v) = %v, want %v", c.pulling, c.slowest, got, c.want)
		}
	}
}

// TestBytesPaceBoundsFleetWrites holds the promise: the fleet's writes
// of bytes alone, a second, are at most ten or what the slowest pace
// gave before (every node every 30 s), whichever is more.
func TestBytesPaceBoundsFleetWrites(t *testing.T) {
	const slowest = 30 * time.Second
	for n := int64(1); n <= 10000; n++ {
		perSecond := float64(n) / BytesPace(n, slowest).Seconds()
		before := float64(n) / slowest.Seconds()
		if limit := max(float64(time.Second/BytesPacePerNode), before); perSecond > limit+1e-9 {
			t.Fatalf("%d nodes write bytes %.2f times a second, over %.2f", n, perSecond, limit)
		}
	}
}

func TestFleetPulling(t *testing.T) {
	warms := []warmv1.ImageWarm{{}, {}, {}}
	warms[0].Status.Nodes.Pulling = 3
	warms[2].Status.Nodes.Pulling = 40
	if got := FleetPulling(warms); got != 43 {
		t.Errorf("FleetPulling = %d, want 43", got)
	}
}
