package pullengine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// fakeUnpack shows an unpacking on cue: how many layers are unpacked and
// the bytes they take.
type fakeUnpack struct {
	mu     sync.Mutex
	layers int
	bytes  int64
}

var _ UnpackView = &fakeUnpack{}

func (f *fakeUnpack) Unpacked(context.Context, []string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes, nil
}

func (f *fakeUnpack) Progress(context.Context, []string) (int, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.layers, f.bytes, nil
}

func (f *fakeUnpack) set(layers int, bytes int64) {
	f.mu.Lock()
	f.layers, f.bytes = layers, bytes
	f.mu.Unlock()
}

// TestUnpackPhaseAndStall follows a pull from Downloading to Unpacking,
// with the unpacked bytes, an unpack rate and a time left that counts the
// unpack; then the unpacking stops, and the pull is cancelled as Stalled
// once nothing was unpacked for the stall timeout.
func TestUnpackPhaseAndStall(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.raw[cfgDigest] = `{"rootfs":{"diff_ids":["sha256:d1","sha256:d2"]}}`
	snaps := &fakeUnpack{}
	h := newHarness(t, Options{Content: store, Snapshots: snaps, StallTimeout: 30 * time.Second, DiskThresholdPercent: 100})
	img := "reg.example/app:v1"
	h.pulling(t, img)
	h.waitTimers(t, 2)
	progress := func() pull.Progress {
		t.Helper()
		s, _ := h.eng.Status(img)
		if s.Progress == nil || !s.Progress.Known {
			t.Fatalf("progress %+v, want known", s.Progress)
		}
		return *s.Progress
	}

	store.write(l1Digest, 500)
	h.reading(t)
	if p := progress(); p.Phase != pull.PhaseDownloading || !p.UnpackSeen || p.Layers != 2 || p.Unpacked != 0 {
		t.Fatalf("progress %+v, want Downloading, 2 layers, none unpacked", p)
	}

	store.mu.Lock()
	delete(store.ingests, l1Digest)
	store.held[l1Digest] = content.Blob{Digest: l1Digest, Size: 1000, CreatedAt: start}
	store.held[l2Digest] = content.Blob{Digest: l2Digest, Size: 500, CreatedAt: start}
	store.mu.Unlock()
	snaps.set(0, 300)
	h.reading(t)
	if p := progress(); p.Phase != pull.PhaseUnpacking || p.Done != p.Total || p.Unpacked != 300 {
		t.Fatalf("progress %+v, want Unpacking with every byte in and 300 unpacked", p)
	}
	snaps.set(1, 900)
	h.reading(t)
	p := progress()
	if p.LayersUnpacked != 1 || p.Unpacked != 900 || p.UnpackRate <= 0 {
		t.Fatalf("progress %+v, want 1 layer and 900 bytes unpacked at a rate", p)
	}
	if left, ok := p.Left(); !ok || left <= 0 {
		t.Errorf("Left() = %v, %v while unpacking at a rate, want a time", left, ok)
	}

	for range 29 {
		h.reading(t)
	}
	h.noResult(t)
	h.clock.Step(time.Second)
	res := h.result(t)
	if res.Class != pull.ClassStalled || !strings.Contains(res.Message, "nothing unpacked for 30s, at 1 of 2 layers unpacked") {
		t.Fatalf("result %+v, want Stalled in the unpack", res)
	}
}

// TestLeftCoversBothPhases: the time left is the download's at its rate,
// then what the unpack will not have done by its end at the node's
// learned rate (the pull's own, then the download's, until one is
// learned), and nothing while there is no rate to go by in the phase
// under way.
func TestLeftCoversBothPhases(t *testing.T) {
	for _, c := range []struct {
		name string
		p    pull.Progress
		want time.Duration
		ok   bool
	}{
		{"download only, unpack unseen", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100}, 2 * time.Second, true},
		{"downloading, no unpack rate yet: the download's", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true}, 5 * time.Second, true},
		{"download and unpack overlap, none learned: the unpack alone at the download's rate", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true, UnpackRate: 50, Unpacked: 100}, 3 * time.Second, true},
		{"none learned, the unpack beside the download faster than it: its own", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true, UnpackRate: 200, Unpacked: 100}, 2 * time.Second, true},
		{"the unpack faster once the download ends", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true, UnpackRate: 25, Unpacked: 50, NodeUnpackRate: 100}, 4 * time.Second, true},
		{"a learned rate slower than the pull's own beside the download: the pull's", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true, UnpackRate: 50, Unpacked: 100, NodeUnpackRate: 10}, 4 * time.Second, true},
		{"the unpack keeps up: the download's", pull.Progress{Known: true, Done: 100, Total: 300, Rate: 100, UnpackSeen: true, UnpackRate: 100, Unpacked: 100, NodeUnpackRate: 100}, 2 * time.Second, true},
		{"unpacking, the node's rate only", pull.Progress{Known: true, Done: 300, Total: 300, Phase: pull.PhaseUnpacking, UnpackSeen: true, Unpacked: 100, NodeUnpackRate: 50}, 4 * time.Second, true},
		{"unpacking at a rate", pull.Progress{Known: true, Done: 300, Total: 300, Phase: pull.PhaseUnpacking, UnpackSeen: true, UnpackRate: 100, Unpacked: 100}, 2 * time.Second, true},
		{"unpacking, no rate yet", pull.Progress{Known: true, Done: 300, Total: 300, Phase: pull.PhaseUnpacking, UnpackSeen: true}, 0, false},
		{"unpacking past the estimate", pull.Progress{Known: true, Done: 300, Total: 300, Phase: pull.PhaseUnpacking, UnpackSeen: true, UnpackRate: 100, Unpacked: 400}, 0, false},
		{"all in, unpack unseen", pull.Progress{Known: true, Done: 300, Total: 300, Rate: 100}, 0, true},
	} {
		got, ok := c.p.Left()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Left() = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestScaledTimeout: the default timeout is given once per started GiB.
func TestScaledTimeout(t *testing.T) {
	for _, c := range []struct {
		size int64
		want time.Duration
	}{
		{0, time.Minute}, {20 << 20, time.Minute}, {1 << 30, time.Minute}, {1<<30 + 1, 2 * time.Minute},
		{20 << 30, 20 * time.Minute}, {1 << 50, 1024 * time.Minute},
	} {
		if got := scaledTimeout(time.Minute, c.size); got != c.want {
			t.Errorf("scaledTimeout(1m, %d) = %v, want %v", c.size, got, c.want)
		}
	}
}

// TestDefaultTimeoutScalesWithSize: a pull whose manifest says 2.5 GiB
// has the default timeout three times over; the message says how long it
// had.
func TestDefaultTimeoutScalesWithSize(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.raw["sha256:m"] = `{"config":{"digest":"` + cfgDigest + `","size":10},"layers":[` +
		`{"digest":"` + l1Digest + `","size":2147483648},{"digest":"` + l2Digest + `","size":536870912}]}`
	h := newHarness(t, Options{Content: store, PullTimeout: time.Minute, DiskThresholdPercent: 100})
	img := "reg.example/big:v1"
	h.pulling(t, img)
	h.waitTimers(t, 2)
	for range 150 {
		h.reading(t)
	}
	h.noResult(t)
	for range 29 {
		h.reading(t)
	}
	h.noResult(t)
	h.clock.Step(time.Second)
	res := h.result(t)
	if res.Class != pull.ClassTimeout || !strings.Contains(res.Message, "within 3m0s") {
		t.Fatalf("result %+v, want a timeout after 3m", res)
	}
}
