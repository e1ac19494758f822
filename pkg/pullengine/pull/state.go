package pull

// State is where an image stands in the engine.
type State string

// States.
const (
	// StateQueued: waiting for a free pull slot.
	StateQueued State = "Queued"
	// StatePulling: the runtime is pulling it.
	StatePulling State = "Pulling"
	// StateBackOff: the last pull failed; no new one before RetryAt.
	StateBackOff State = "BackOff"
	// StateFailed: it cannot be pulled as things stand: an invalid name
	// (until the spec changes), disk pressure (until RetryAt, when the
	// level is read again), or a failure whose back-off has run out.
	StateFailed State = "Failed"
	// StatePulled: the last pull succeeded and none is pending.
	StatePulled State = "Pulled"
)
