package perf

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
)

// reportWatch follows the fleet's NodeWarms as the controller does and
// notes when each node first reported every image Present. It splits
// "Ready after the last pull" into the agents' share (their reports
// reaching the API server) and the controller's (its summary after the
// last report). It is one watch beside the fleet's thousands.
type reportWatch struct {
	mu    sync.Mutex
	first map[string]time.Time // node: its first report with every image Present
	// reconnects counts the watches opened again after the API server
	// closed one.
	reconnects int
	stop       context.CancelFunc
	done       chan struct{}
}

// watchReports starts following NodeWarms until the returned watch is
// stopped; images is how many each node must report Present. The API
// server closes a watcher that falls behind (this one shares the
// simulation's starved process): it is opened again, and what it then
// lists counts as seen at that moment, later than it came; reconnects
// says how often, so a figure read across one is known for an upper
// bound.
func watchReports(b *testing.B, cp *testbed.ControlPlane, images int) *reportWatch {
	b.Helper()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &reportWatch{first: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	w, err := wc.Watch(ctx, &warmv1.NodeWarmList{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	go func() {
		defer close(rw.done)
		for {
			rw.follow(ctx, w, images)
			for ctx.Err() == nil {
				if w, err = wc.Watch(ctx, &warmv1.NodeWarmList{}); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return
			}
			rw.mu.Lock()
			rw.reconnects++
			rw.mu.Unlock()
		}
	}()
	b.Cleanup(rw.close)
	return rw
}

// follow notes every node w shows with all images Present, until w
// closes or ctx ends.
func (rw *reportWatch) follow(ctx context.Context, w watch.Interface, images int) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if nw, ok := ev.Object.(*warmv1.NodeWarm); ok && allPresent(nw, images) {
				rw.note(nw.Name, time.Now())
			}
		}
	}
}

func (rw *reportWatch) note(node string, at time.Time) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if _, ok := rw.first[node]; !ok {
		rw.first[node] = at
	}
}

func (rw *reportWatch) close() {
	rw.stop()
	<-rw.done
}

// last is when the last of n nodes first reported every image Present;
// false if fewer than n did (the watch ended early, and the figure would
// say less than it seems to).
func (rw *reportWatch) last(n int) (time.Time, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var last time.Time
	for _, t := range rw.first {
		if t.After(last) {
			last = t
		}
	}
	return last, len(rw.first) >= n
}

// reopened is how many times the watch was opened again.
func (rw *reportWatch) reopened() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.reconnects
}

// lags are, for each node seen, how long after its own last pull its
// report of every image Present reached the API server, sorted.
func (rw *reportWatch) lags(f *scale.Fleet) []time.Duration {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out := make([]time.Duration, 0, len(rw.first))
	for node, seen := range rw.first {
		if rt := f.Runtimes[node]; rt != nil {
			_, pulled := rt.Pulls()
			out = append(out, seen.Sub(pulled))
		}
	}
	slices.Sort(out)
	return out
}

// quantile is the q quantile of sorted d, 0 if d is empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// allPresent says whether nw reports at least images images, all Present.
func allPresent(nw *warmv1.NodeWarm, images int) bool {
	present := 0
	for _, im := range nw.Status.Images {
		if im.State != warmv1.ImagePresent {
			return false
		}
		present++
	}
	return present >= images
}
