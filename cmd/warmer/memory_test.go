package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// heapReleased is the heap memory returned to the OS and not reused.
func heapReleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var live, garbage [][]byte

// TestMemoryReturnerAfterQuiet: no collection is forced until the quiet
// period after the last kick ends; then the freed heap goes back to the
// OS.
// As in the agent, the live heap is large enough that the runtime's own
// scavenger keeps what is freed (it returns only what lies above the heap
// goal). It uses the real Go runtime: what it checks is the runtime's own
// accounting.
func TestMemoryReturnerAfterQuiet(t *testing.T) {
	m := &memoryReturner{quiet: 300 * time.Millisecond, minFree: 1 << 20}
	for range 64 {
		live = append(live, make([]byte, 256<<10))
	}
	for range 16 {
		garbage = append(garbage, make([]byte, 256<<10))
	}
	garbage = nil
	runtime.GC()
	defer func() { live = nil }()
	if free := heapFree(); free < 3<<20 {
		t.Fatalf("only %d bytes of heap free after dropping 4 MiB", free)
	}
	before := heapReleased()
	forced := forcedGCs()
	m.kick()
	time.Sleep(150 * time.Millisecond)
	m.kick() // the quiet period starts again
	time.Sleep(200 * time.Millisecond)
	if n := forcedGCs(); n != forced {
		t.Fatalf("%d forced collections before the quiet period ended", n-forced)
	}
	deadline := time.Now().Add(5 * time.Second)
	for forcedGCs() == forced || heapReleased() < before+3<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("heap free %d bytes, released %d more, %d forced collections: not returned after the quiet period",
				heapFree(), heapReleased()-before, forcedGCs()-forced)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// forcedGCs is how many collections the program forced.
func forcedGCs() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumForcedGC
}

// TestMemoryReturnerSpaced: a return due within the spacing of the last
// waits for it.
func TestMemoryReturnerSpaced(t *testing.T) {
	m := &memoryReturner{quiet: 10 * time.Millisecond, spacing: 500 * time.Millisecond}
	forced := forcedGCs()
	m.kick()
	waitForced(t, forced+1, time.Second)
	m.kick()
	time.Sleep(200 * time.Millisecond)
	if n := forcedGCs(); n != forced+1 {
		t.Fatalf("%d forced collections within the spacing, want 1", n-forced)
	}
	waitForced(t, forced+2, 2*time.Second) // the spacing over
}

// waitForced waits until the program has forced n collections in all.
func waitForced(t *testing.T, n uint32, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); forcedGCs() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d forced collections after %v, want %d", forcedGCs(), within, n)
		}
	}
}

// TestMemoryReturnerLeavesLittle: less free heap than minFree is left
// alone (no forced collection).
func TestMemoryReturnerLeavesLittle(t *testing.T) {
	before := forcedGCs()
	(&memoryReturner{minFree: 1 << 40}).maybeReturn()
	if after := forcedGCs(); after != before {
		t.Errorf("forced collections %d -> %d with little free", before, after)
	}
}
