package main

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// memoryReturner gives the Go heap's free pages back to the OS once the
// agent has been quiet for a while. The runtime keeps freed pages up to
// about its heap goal and returns them only slowly, so a busy moment (a
// start with hundreds of images, a warm) leaves the agent's resident
// memory, which the kubelet counts as its working set on every node,
// megabytes above what the agent holds at rest (docs/performance.md,
// section 4). Returning them costs one forced collection (some
// milliseconds of CPU on the agent's heap), done only after a quiet
// period, only when enough is free to be worth it, and no more often
// than every spacing, so that an agent at rest, whose resync passes each
// leave a little garbage, does not pay it every pass.
type memoryReturner struct {
	// quiet is how long after the last pass the pages are returned.
	quiet time.Duration
	// minFree is the least free heap worth a forced collection.
	minFree uint64
	// spacing is the least time between two returns; a return due
	// sooner waits for it.
	spacing time.Duration
	// release and free are debug.FreeOSMemory and heapFree unless a test
	// sets them.
	release func()
	free    func() uint64

	mu    sync.Mutex
	timer *time.Timer
	last  time.Time
}

// Defaults of the agent's memoryReturner.
const (
	returnMemoryQuiet   = 10 * time.Second
	returnMemoryMinFree = 1 << 20
	returnMemorySpacing = 5 * time.Minute
)

// kick notes a pass: the quiet period starts again.
func (m *memoryReturner) kick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer == nil {
		m.timer = time.AfterFunc(m.quiet, m.maybeReturn)
		return
	}
	m.timer.Reset(m.quiet)
}

// maybeReturn returns the free heap to the OS if there is enough of it,
// or sets itself for when the spacing allows.
func (m *memoryReturner) maybeReturn() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if wait := m.spacing - time.Since(m.last); !m.last.IsZero() && wait > 0 {
		m.timer.Reset(wait)
		return
	}
	release, free := m.release, m.free
	if release == nil {
		release = debug.FreeOSMemory
	}
	if free == nil {
		free = heapFree
	}
	if n := free(); n >= m.minFree {
		release()
		m.last = time.Now()
		// At most one line every spacing, at debug level: what an
		// operator comparing the agent's memory over time would look for.
		ctrl.Log.V(1).Info("Returned freed heap to the OS", "bytes", n)
	}
}

// heapFree is the heap memory that is free and not yet returned to the OS.
func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
