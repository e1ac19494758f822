package pullengine

// Shares take turns.
//
// Within one priority, queued pulls start in turn by their requests'
// Share, each share's in the order they came: a share that queued a
// hundred images ahead of another's one does not make that one wait for
// all hundred. Each job gets a turn when it is queued, one past its
// share's last job's at its priority, and never before the turn of the
// last job of that priority to start: a share that had nothing queued
// joins at the current turn instead of cashing in the turns it did not
// use. The queue orders by priority, then turn, then arrival, so a
// share's second job waits for every other share's first, the one under
// way counted. This is start-time fair queueing with every pull costing
// one turn, whatever its size: the engine cannot know sizes before it
// pulls.
//
// The turns are kept only while the engine has jobs: once the last ends
// they start again from zero.

// turnKey is a share at a priority: the turns of one priority are apart
// from another's, as priorities order first.
type turnKey struct {
	priority int32
	share    string
}

// turns is the engine's bookkeeping of turns, guarded by Engine.mu.
type turns struct {
	// next is each share's next turn, while it is ahead of the current
	// one.
	next map[turnKey]uint64
	// current is, by priority, the turn of the last job that started.
	current map[int32]uint64
}

// give returns the next turn of share at priority.
func (t *turns) give(priority int32, share string) uint64 {
	if t.next == nil {
		t.next, t.current = map[turnKey]uint64{}, map[int32]uint64{}
	}
	k := turnKey{priority, share}
	n := max(t.next[k], t.current[priority])
	t.next[k] = n + 1
	return n
}

// after returns the next turn of share at priority, and not one before
// turn: for a paused pull queued again behind the pull it gave its slot
// to (shares.go).
func (t *turns) after(priority int32, share string, turn uint64) uint64 {
	n := max(t.give(priority, share), turn)
	t.next[turnKey{priority, share}] = n + 1
	return n
}

// started moves the priority's current turn to j's, and forgets the
// shares whose next turn is no longer ahead of it.
func (t *turns) started(j *job) {
	if t.current == nil || j.turn <= t.current[j.priority] {
		return
	}
	t.current[j.priority] = j.turn
	for k, n := range t.next {
		if k.priority == j.priority && n <= j.turn {
			delete(t.next, k)
		}
	}
}

// reset forgets every turn; for when no job holds one.
func (t *turns) reset() { t.next, t.current = nil, nil }
