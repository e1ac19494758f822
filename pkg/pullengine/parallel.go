package pullengine

import "sync"

// parallelPuller runs up to max pulls at once, each in its own goroutine.
type parallelPuller struct {
	max int // < 1: no cap
}

var _ Puller = &parallelPuller{}

// NewParallelPuller returns a Puller that runs up to maxParallel pulls at
// once; maxParallel < 1 means no cap.
func NewParallelPuller(maxParallel int) Puller { return &parallelPuller{max: maxParallel} }

// Run takes a slot before asking for work, so that a pull is chosen only
// when it can start: a higher-priority pull queued meanwhile goes first.
func (p *parallelPuller) Run(next func() (func(), bool)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var slots chan struct{}
	if p.max > 0 {
		slots = make(chan struct{}, p.max)
	}
	for {
		if slots != nil {
			slots <- struct{}{}
		}
		work, ok := next()
		if !ok {
			return
		}
		wg.Go(func() {
			defer func() {
				if slots != nil {
					<-slots
				}
			}()
			work()
		})
	}
}
