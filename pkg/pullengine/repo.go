package pullengine

import (
	"container/heap"
	"context"
	"slices"
)

// One pull per repository at a time.
//
// Jobs are keyed by normalised reference, so the spellings of one
// reference share a job. But an image named by tag in one request and by
// digest in another is two references, and before a pull ends nothing
// shows that the tag is that digest: run side by side, both pulls reach the
// registry and fetch the same manifest. So the engine runs the pulls of one
// repository one at a time:
//
//   - a job whose repository has a pull under way is parked, and queued
//     again when that pull ends;
//   - when a repository's next job names a digest, a queued job of the same
//     repository and priority naming a tag goes first: a pull by tag records
//     the image's digest too, a pull by digest records no tag;
//   - a job naming a digest first asks the runtime (ImageStatus, which does
//     not reach the registry) whether a pull of its repository that
//     succeeded since the job was queued brought its image; if so it
//     finishes as pulled, with no PullImage call.
//
// Only digests are looked up: a digest names fixed content, so the image a
// sibling pulled under it is the one asked for, whereas a tag means what
// the registry says now, and a job for a present tag is a refresh that must
// ask it. The image found must be one a sibling's successful pull returned:
// an image record the runtime kept after an earlier failed pull does not
// count. Different tags of one repository are pulled one after the other
// too; they usually share layers, which the second pull then finds present.
// A tag asked for while its digest is already being pulled is pulled after
// it, and the runtime then only asks the registry what the tag names.

// maxPulledKept bounds the successful pulls a repository remembers while it
// has jobs; forgetting one only costs a PullImage call.
const maxPulledKept = 16

// repo is what the engine keeps for a repository while it has jobs.
type repo struct {
	jobs    int    // the repository's jobs in Engine.jobs
	running *job   // its pull under way, if any
	parked  []*job // queued jobs taken off the queue while running was set
	pulled  []pulledImage
}

// pulledImage is a successful pull of the repository: the runtime's image
// ID, and the engine sequence number when it ended.
type pulledImage struct {
	id  string
	seq uint64
}

// addJobLocked queues a new job.
func (e *Engine) addJobLocked(j *job) {
	e.jobs[j.ref.String()] = j
	r := e.repos[j.ref.Name()]
	if r == nil {
		r = &repo{}
		e.repos[j.ref.Name()] = r
	}
	r.jobs++
	heap.Push(&e.queue, j)
	e.metrics.pullsQueued.Inc()
	select {
	case e.busy <- struct{}{}:
	default:
	}
}

// removeQueuedLocked takes a job that has not started out of the engine.
func (e *Engine) removeQueuedLocked(j *job) {
	r := e.repos[j.ref.Name()]
	if j.index >= 0 {
		heap.Remove(&e.queue, j.index)
	} else {
		r.parked = slices.DeleteFunc(r.parked, func(p *job) bool { return p == j })
	}
	e.metrics.pullsQueued.Dec()
	delete(e.jobs, j.ref.String())
	e.forgetLocked(r, j)
}

// forgetLocked counts a job of r out, and drops r with its last job.
func (e *Engine) forgetLocked(r *repo, j *job) {
	if r.jobs--; r.jobs == 0 {
		delete(e.repos, j.ref.Name())
	}
}

// popRunnableLocked waits for a queued job whose repository has no pull
// under way, marks it running there, and returns it with the image IDs its
// siblings pulled since it was queued. It returns nil once the engine
// stops. Jobs of busy repositories met on the way are parked.
func (e *Engine) popRunnableLocked() (*job, []string) {
	var held []*job // jobs waiting for a smaller image's pull (sizes.go)
	defer func() {
		for _, h := range held {
			heap.Push(&e.queue, h)
		}
	}()
	for {
		// While yielding no pull starts; the watcher wakes the puller
		// when it ends, or holds back no longer.
		for (len(e.queue) == 0 || e.holdingLocked()) && !e.stopped {
			if len(e.queue) == 0 { // only held jobs: back in, until a change
				for _, h := range held {
					heap.Push(&e.queue, h)
				}
				held = nil
			}
			e.wake.Wait()
		}
		if e.stopped {
			return nil, nil
		}
		j := heap.Pop(&e.queue).(*job)
		if e.heldForSmallLocked(j) {
			held = append(held, j)
			continue
		}
		r := e.repos[j.ref.Name()]
		if r.running != nil {
			r.parked = append(r.parked, j)
			continue
		}
		if w := e.owedLocked(j); w != nil {
			heap.Remove(&e.queue, w.index)
			heap.Push(&e.queue, j)
			j = w
			r = e.repos[j.ref.Name()]
		}
		j = e.preferTagLocked(j)
		e.turns.started(j)
		r.running = j
		return j, r.pulledSince(j)
	}
}

// preferTagLocked returns, for a job naming a digest, the earliest queued
// job of the same repository and priority naming a tag, putting j back in
// the queue; otherwise j. Priorities hold: only equals trade places.
func (e *Engine) preferTagLocked(j *job) *job {
	if j.ref.Digest() == "" {
		return j
	}
	var tag *job
	for _, q := range e.queue {
		if q.ref.Digest() == "" && q.priority == j.priority && q.ref.Name() == j.ref.Name() && (tag == nil || q.seq < tag.seq) {
			tag = q
		}
	}
	if tag == nil {
		return j
	}
	heap.Remove(&e.queue, tag.index)
	heap.Push(&e.queue, j)
	return tag
}

// pulledSince returns the image IDs the repository's successful pulls
// returned since j was queued, if j names a digest.
func (r *repo) pulledSince(j *job) []string {
	if j.ref.Digest() == "" {
		return nil
	}
	var ids []string
	for _, p := range r.pulled {
		if p.seq > j.seq {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// endPullLocked frees j's repository for its next job, queues the jobs
// parked behind j, and remembers the image a successful pull returned.
func (e *Engine) endPullLocked(j *job, res Result) {
	r := e.repos[j.ref.Name()]
	if res.Succeeded() && res.ImageRef != "" {
		e.seq++
		r.pulled = append(r.pulled, pulledImage{id: res.ImageRef, seq: e.seq})
		if len(r.pulled) > maxPulledKept {
			r.pulled = slices.Delete(r.pulled, 0, len(r.pulled)-maxPulledKept)
		}
	}
	e.freeRepoLocked(r)
	e.forgetLocked(r, j)
}

// freeRepoLocked ends r's pull under way, queueing the jobs parked
// behind it.
func (e *Engine) freeRepoLocked(r *repo) {
	r.running = nil
	for _, p := range r.parked {
		heap.Push(&e.queue, p)
	}
	r.parked = nil
}

// pulledBySibling finishes a job naming a digest without a pull when the
// runtime holds its image and a sibling's pull brought it (see above).
func (e *Engine) pulledBySibling(ctx context.Context, j *job, ids []string) (Result, bool) {
	if len(ids) == 0 {
		return Result{}, false
	}
	img, err := e.svc.ImageStatus(ctx, j.ref.String())
	if err != nil || img == nil || !slices.Contains(ids, img.GetId()) {
		return Result{}, false
	}
	return Result{Image: j.ref.Original(), Ref: j.ref.String(), ImageRef: img.GetId(), Size: img.GetSize(),
		Digest: repoDigestFor(img, j.ref.Name())}, true
}
