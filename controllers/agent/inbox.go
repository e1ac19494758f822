package agent

import (
	"sync"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	"k8s.io/utils/clock"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// inbox is the one thing the engine's goroutines share with the agent's:
// the engine reports pulls as they start and end, the inbox queues the
// reports and asks for a pass, and the pass takes them all in (drain) and
// hands them to the planner. Nothing else of the agent is shared.
type inbox struct {
	clock clock.PassiveClock
	// poke asks for a pass without blocking.
	poke func()
	// pokeOnStart asks for a pass when a pull starts too, not only when
	// one ends (for per-image Pulling events).
	pokeOnStart bool

	mu      sync.Mutex
	started []plan.StartedPull
	results []pullengine.Result
}

var (
	_ pullengine.Listener      = &inbox{}
	_ pullengine.YieldListener = &inbox{}
)

// Yielding asks for a pass, so that the NodeWarm says whether the engine
// yields.
func (b *inbox) Yielding(bool) { b.poke() }

// PullStarted queues a started pull.
func (b *inbox) PullStarted(ref imageref.Reference, tag string) {
	b.mu.Lock()
	b.started = append(b.started, plan.StartedPull{Key: ref.String(), Tag: tag, At: b.clock.Now()})
	b.mu.Unlock()
	if b.pokeOnStart {
		b.poke()
	}
}

// PullFinished queues a finished pull and asks for a pass, so that the
// NodeWarm shows it.
func (b *inbox) PullFinished(res pullengine.Result) {
	b.mu.Lock()
	b.results = append(b.results, res)
	b.mu.Unlock()
	b.poke()
}

// drain takes every report queued so far.
func (b *inbox) drain() ([]plan.StartedPull, []pullengine.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, r := b.started, b.results
	b.started, b.results = nil, nil
	return s, r
}
