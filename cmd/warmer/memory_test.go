package main

import (
	"runtime"
	"testing"
	"time"
)

// releases makes m record its returns on the channel it gives back, with
// free bytes of free heap, instead of forcing collections: the timing is
// the returner's, and a test of it must not hang on what the runtime's
// own scavenger did meanwhile.
func releases(m *memoryReturner, free uint64) <-chan time.Time {
	ch := make(chan time.Time, 8)
	m.release = func() { ch <- time.Now() }
	m.free = func() uint64 { return free }
	return ch
}

// nextRelease waits for the next return.
func nextRelease(t *testing.T, ch <-chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(5 * time.Second):
		t.Fatal("no return within 5s")
		return time.Time{}
	}
}

// TestMemoryReturnerAfterQuiet: memory is returned no sooner than the
// quiet period after the last kick. The times it asserts are lower
// bounds, which a loaded machine can only lengthen.
func TestMemoryReturnerAfterQuiet(t *testing.T) {
	m := &memoryReturner{quiet: 300 * time.Millisecond, minFree: 1 << 20}
	ch := releases(m, 2<<20)
	m.kick()
	time.Sleep(150 * time.Millisecond)
	lastKick := time.Now()
	m.kick() // the quiet period starts again
	if since := nextRelease(t, ch).Sub(lastKick); since < m.quiet {
		t.Fatalf("returned %v after the last kick, within the %v quiet period", since, m.quiet)
	}
}

// TestMemoryReturnerSpaced: a return due within the spacing of the last
// waits for it.
func TestMemoryReturnerSpaced(t *testing.T) {
	m := &memoryReturner{quiet: 10 * time.Millisecond, spacing: 500 * time.Millisecond}
	ch := releases(m, 2<<20)
	m.kick()
	first := nextRelease(t, ch)
	m.kick()
	if gap := nextRelease(t, ch).Sub(first); gap < m.spacing {
		t.Fatalf("two returns %v apart, want at least the %v spacing", gap, m.spacing)
	}
}

// TestMemoryReturnerLeavesLittle: less free heap than minFree is left
// alone.
func TestMemoryReturnerLeavesLittle(t *testing.T) {
	m := &memoryReturner{minFree: 1 << 20}
	ch := releases(m, 1<<20-1)
	m.maybeReturn()
	select {
	case <-ch:
		t.Fatal("returned with less than minFree free")
	default:
	}
}

// TestMemoryReturnerReleases: unset, the release is the Go runtime's own:
// it forces a collection and the heap's free pages go back to the OS.
func TestMemoryReturnerReleases(t *testing.T) {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	(&memoryReturner{}).maybeReturn()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumForcedGC <= before.NumForcedGC {
		t.Errorf("forced collections %d -> %d", before.NumForcedGC, after.NumForcedGC)
	}
	if free := heapFree(); free > 1<<20 {
		t.Errorf("%d bytes of heap still free after the return", free)
	}
}
