package scale

import "sync"

// PullGauge counts the pulls in flight across a whole simulated fleet, by
// image, and keeps the highest count any one image reached: how many
// nodes asked the registry for the same image at once, which a rollout's
// maxPulling bounds.
type PullGauge struct {
	mu   sync.Mutex
	now  map[string]int
	peak int
}

// NewPullGauge returns a gauge with no pull in flight.
func NewPullGauge() *PullGauge { return &PullGauge{now: map[string]int{}} }

func (g *PullGauge) begin(ref string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[ref]++
	g.peak = max(g.peak, g.now[ref])
}

func (g *PullGauge) end(ref string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[ref]--
}

// Peak is the most pulls of one image that were in flight at once.
func (g *PullGauge) Peak() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}
