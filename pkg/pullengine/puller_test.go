package pullengine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// feed hands out n pieces of work that each take a while and record how
// many run at once, in the order they were handed out.
type feed struct {
	mu      sync.Mutex
	left    int
	order   []int
	running atomic.Int32
	peak    atomic.Int32
}

func (f *feed) next() (func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == 0 {
		return nil, false
	}
	f.left--
	id := f.left
	return func() {
		now := f.running.Add(1)
		for {
			p := f.peak.Load()
			if now <= p || f.peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		f.running.Add(-1)
		f.mu.Lock()
		f.order = append(f.order, id)
		f.mu.Unlock()
	}, true
}

func TestPullers(t *testing.T) {
	tests := []struct {
		name     string
		puller   Puller
		wantPeak int32
	}{
		{"serial", NewPuller(true, 5), 1},
		{"max 1 is serial", NewPuller(false, 1), 1},
		{"parallel 3", NewPuller(false, 3), 3},
		{"uncapped", NewPuller(false, 0), 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &feed{left: 20}
			tt.puller.Run(f.next) // returns only when all work has finished
			if len(f.order) != 20 {
				t.Fatalf("ran %d of 20", len(f.order))
			}
			if peak := f.peak.Load(); peak > tt.wantPeak || (tt.wantPeak <= 3 && peak != tt.wantPeak) {
				t.Fatalf("peak concurrency %d, want %d", peak, tt.wantPeak)
			}
			if tt.wantPeak == 1 {
				for i, id := range f.order {
					if id != 19-i {
						t.Fatalf("serial order %v", f.order)
					}
				}
			}
		})
	}
	if _, ok := NewPuller(true, 3).(*serialPuller); !ok {
		t.Error("serialize should win over a parallel cap")
	}
}
