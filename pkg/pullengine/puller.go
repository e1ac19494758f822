package pullengine

// Puller decides how many pulls run at once; the engine decides which pull
// is next (highest priority first). Like the kubelet's --serialize-image-pulls
// and --max-parallel-image-pulls, the choice is made once, at construction.
type Puller interface {
	// Run calls next for work until next reports false, runs each piece of
	// work it gets, and returns once all the work it started has finished.
	// next blocks until there is work or the engine stops. A Puller asks for
	// work only when it has room to run it, so the engine's choice of what
	// comes next is made as late as possible.
	Run(next func() (work func(), ok bool))
}

// slotsOf is how many pulls NewPuller's choice runs at once; < 1: no cap.
func slotsOf(serialize bool, maxParallel int) int {
	if serialize {
		return 1
	}
	return maxParallel
}

// NewPuller picks the implementation the kubelet's way: serial when
// serialize is set or maxParallel is 1; otherwise parallel, capped at
// maxParallel, or uncapped when maxParallel < 1.
func NewPuller(serialize bool, maxParallel int) Puller {
	if serialize || maxParallel == 1 {
		return NewSerialPuller()
	}
	return NewParallelPuller(maxParallel)
}
