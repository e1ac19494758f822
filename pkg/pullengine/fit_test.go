package pullengine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// fakeFs is an image filesystem whose free space the test sets: a disk
// that fills and empties on cue. The real small filesystem is in
// test/faults/registry's disk tests.
type fakeFs struct {
	mu    sync.Mutex
	stats FsStats
	n     int // readings
}

func (f *fakeFs) ReadImageFs(context.Context) (FsStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.stats, nil
}

// reads is how many times the filesystem was read.
func (f *fakeFs) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeFs) set(available uint64) {
	f.mu.Lock()
	f.stats.AvailableBytes = available
	f.mu.Unlock()
}

// TestTooBigCancelledThenHeld: once the pull's manifest shows the image
// needs more room than is left below the threshold (twice the bytes to
// fetch), the pull is cancelled as DiskPressure without a back-off; the
// image is not pulled again, nor the registry asked, until a disk
// reading finds the room.
func TestTooBigCancelledThenHeld(t *testing.T) {
	content := newFakeContent(time.Unix(1_000_000, 0))
	fs := &fakeFs{stats: FsStats{CapacityBytes: 10_000, AvailableBytes: 3_000}} // 1,000 below 80 %
	h := newHarness(t, Options{Content: content, ImageFs: fs})
	img := "reg.example/app:v1"
	h.pulling(t, img)
	h.waitTimers(t, 2)
	h.clock.Step(time.Second) // the watcher's first reading finds the manifest
	res := h.result(t)
	// The config is there: 1,500 bytes of layers to fetch, 3,000 to hold.
	if res.Class != pull.ClassDiskPressure || !strings.Contains(res.Message, "needs about 2.9 KiB (2 times the 1.5 KiB it has still to fetch") ||
		!strings.Contains(res.Message, "1000 B left below the 80% pull threshold") {
		t.Fatalf("result %+v, want DiskPressure with the sizes", res)
	}
	if want := h.clock.Now().Add(DefaultDiskCheckInterval); !res.RetryAt.Equal(want) {
		t.Errorf("RetryAt %v, want the guard's next reading %v (no back-off)", res.RetryAt, want)
	}
	if s := h.enqueue(img, 0); s.State != pull.StateFailed || len(h.svc.pulled()) != 1 {
		t.Errorf("asked again at once: %+v after %d pulls; want held, one pull", s, len(h.svc.pulled()))
	}

	h.clock.Step(DefaultDiskCheckInterval)
	h.enqueue(img, 0)
	if res := h.result(t); res.Class != pull.ClassDiskPressure || res.Attempts != 0 || len(h.svc.pulled()) != 1 {
		t.Errorf("with the disk still full: %+v after %d pulls; want held before the runtime is called", res, len(h.svc.pulled()))
	}

	fs.set(9_000)
	h.clock.Step(DefaultDiskCheckInterval)
	h.enqueue(img, 0)
	h.svc.waitStarted(t, key(t, img))
}
