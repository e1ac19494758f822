package pullengine

import "container/heap"

// jobQueue orders queued jobs for container/heap: higher priority first,
// then by turn (turns.go: the shares of one priority take turns), then
// first come, first served.
type jobQueue []*job

var _ heap.Interface = &jobQueue{}

// Len is the number of queued jobs.
func (q jobQueue) Len() int { return len(q) }

// Less puts higher priority first, then the earlier turn, then earlier
// arrival.
func (q jobQueue) Less(i, j int) bool { return before(q[i], q[j]) }

// before says whether queued job a starts before b.
func before(a, b *job) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.turn != b.turn {
		return a.turn < b.turn
	}
	return a.seq < b.seq
}

// Swap keeps each job's index current, for heap.Fix and heap.Remove.
func (q jobQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

// Push adds a job; use heap.Push.
func (q *jobQueue) Push(x any) {
	j := x.(*job)
	j.index = len(*q)
	*q = append(*q, j)
}

// Pop removes the last job; use heap.Pop.
func (q *jobQueue) Pop() any {
	old := *q
	j := old[len(old)-1]
	old[len(old)-1] = nil
	j.index = -1
	*q = old[:len(old)-1]
	return j
}
