package pullengine

import (
	"math"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// unpacking is a track with every blob in, unpacking, as the watcher
// leaves it, with the node's learned rate node.
func unpacking(t *testing.T, node float64, start time.Time) *track {
	t.Helper()
	ref, err := imageref.Parse("reg.example/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTrack(ref, start)
	tr.p.Known, tr.p.Total, tr.p.Done, tr.p.Phase = true, 1000, 1000, pull.PhaseUnpacking
	tr.p.NodeUnpackRate = node
	return tr
}

// TestUnpackRateOnceDownloaded: once every blob is in, a pull's unpack
// rate is its average since, not the smoothed one that carries the slower
// rate read beside the download; the node's learned rate weighs in as
// two seconds of it; and the node learns from a pull whose stretch was
// long enough, not from a shorter one.
func TestUnpackRateOnceDownloaded(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	cases := []struct {
		name    string
		node    float64
		reads   []unpackReading // bytes unpacked at seconds after start
		want    float64
		learned float64 // the node's rate after the pull ends, learned from 0
	}{
		{"its own average, nothing learned", 0, []unpackReading{{100, at(0)}, {150, at(time.Second)}, {400, at(2 * time.Second)}}, 150, 150},
		{"too short to tell: the smoothed rate", 0, []unpackReading{{100, at(0)}, {120, at(100 * time.Millisecond)}}, 130, 0},
		{"the node's rate weighs in", 100, []unpackReading{{100, at(0)}, {500, at(2 * time.Second)}}, 150, 200},
		{"the node's rate alone at first", 100, []unpackReading{{100, at(0)}}, 100, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := unpacking(t, c.node, start.Add(-time.Minute))
			tr.p.UnpackSeen, tr.p.Unpacked, tr.unpackAt = true, 0, start.Add(-time.Second)
			for _, r := range c.reads {
				tr.unpacked(2, 0, r.bytes, r.at)
			}
			if math.Abs(tr.p.UnpackRate-c.want) > 1e-9 {
				t.Errorf("UnpackRate = %v, want %v", tr.p.UnpackRate, c.want)
			}
			w := &watcher{}
			w.learn(tr)
			if math.Abs(w.unpackRate-c.learned) > 1e-9 {
				t.Errorf("node rate learned = %v, want %v", w.unpackRate, c.learned)
			}
		})
	}
}

// TestNodeUnpackRateSmoothed: each pull weighs half in what the node
// learned.
func TestNodeUnpackRateSmoothed(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	w := &watcher{}
	for _, rate := range []int64{100, 300} {
		tr := unpacking(t, 0, start)
		tr.alone = unpackReading{0, start}
		tr.last = unpackReading{rate, start.Add(time.Second)}
		w.learn(tr)
	}
	if w.unpackRate != 200 {
		t.Errorf("node rate = %v after pulls at 100 and 300 a second, want 200", w.unpackRate)
	}
}

// TestUnpackedNeverGoesDown: a reading of fewer bytes or layers unpacked
// than the one before (containerd leaves a layer out of its list while it
// commits it) keeps the one before.
func TestUnpackedNeverGoesDown(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	tr := unpacking(t, 0, start)
	tr.unpacked(4, 2, 600, start)
	tr.unpacked(4, 1, 350, start.Add(time.Second))
	if tr.p.Unpacked != 600 || tr.p.LayersUnpacked != 2 {
		t.Errorf("after 600 bytes and 2 layers, then 350 and 1: %d bytes, %d layers; want 600, 2", tr.p.Unpacked, tr.p.LayersUnpacked)
	}
	tr.unpacked(4, 3, 700, start.Add(2*time.Second))
	if tr.p.Unpacked != 700 || tr.p.LayersUnpacked != 3 {
		t.Errorf("then 700 and 3: %d bytes, %d layers", tr.p.Unpacked, tr.p.LayersUnpacked)
	}
}
