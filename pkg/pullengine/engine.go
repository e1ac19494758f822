package pullengine

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// Engine pulls images through a node's runtime: it queues requests by
// priority, each priority's shares in turn, merges requests for the same image, runs pulls through its
// Puller with per-image back-off, a disk guard, a registry throttle and a
// per-pull timeout, and cancels pulls no longer wanted. It is safe for
// concurrent use.
type Engine struct {
	svc      ImageService // throttled
	puller   Puller
	slots    int   // pulls at once; < 1: no cap
	large    int64 // compressed bytes from which a pull is large (sizes.go)
	backoff  *backoff
	guard    *diskGuard
	clock    clock.WithDelayedExecution
	listener Listener
	provider CredentialProvider
	timeout  time.Duration
	metrics  *metrics
	// content, watchEvery and stall: see Options.Content.
	content    ContentView
	snapshots  SnapshotView
	watchEvery time.Duration
	stall      time.Duration
	yieldMode  YieldMode

	mu      sync.Mutex
	wake    *sync.Cond // signalled when the queue grows or the engine stops
	queue   jobQueue
	jobs    map[string]*job   // queued or running, by normalised reference
	repos   map[string]*repo  // of the jobs, by repository name
	last    map[string]Result // last finished pull, by normalised reference
	needs   map[string]need   // what an image that did not fit needs (fit.go, unpack.go)
	yield   Yield             // whether the engine yields to the runtime's other pulls (yield.go)
	mine    map[string]bool   // the blobs its pulls fetch, as the watcher last saw them
	busy    chan struct{}     // wakes the watcher at rest when a job is queued
	seq     uint64
	turns   turns           // the shares' turns in the queue (turns.go)
	ctx     context.Context // Start's: the parent of every pull
	log     logr.Logger
	started bool
	stopped bool

	// yieldSpent is set once yielding has lasted yieldHoldMax: it holds
	// no pull back until it ends (yield.go).
	yieldSpent bool
	// shareTimer calls shareSlots when a pull to pause will have run
	// shareRunMin (shares.go); nil when none is set.
	shareTimer clock.Timer
	// kept counts, by lease, the pulls yet to end whose bytes it holds
	// (keep.go).
	kept map[string]int
}

// New returns an engine pulling through svc. Call Start to run pulls;
// requests may be queued before.
func New(svc ImageService, opts Options) *Engine {
	opts = opts.withDefaults()
	e := &Engine{
		svc:      Throttle(svc, opts.RegistryQPS, opts.RegistryBurst, opts.Clock),
		puller:   NewPuller(opts.SerializePulls, opts.MaxParallelPulls),
		slots:    slotsOf(opts.SerializePulls, opts.MaxParallelPulls),
		backoff:  newBackoff(opts.BackOffInitial, opts.BackOffMax, opts.BackOffJitter, opts.Clock),
		clock:    opts.Clock,
		listener: opts.Listener,
		provider: opts.Credentials,
		timeout:  opts.PullTimeout,
		large:    opts.LargePullBytes,
		metrics:  newMetrics(opts.Registerer),
		content:  opts.Content, snapshots: opts.Snapshots, watchEvery: opts.ProgressInterval, stall: opts.StallTimeout, yieldMode: opts.Yield,
		jobs:  map[string]*job{},
		repos: map[string]*repo{},
		last:  map[string]Result{},
		needs: map[string]need{},
		kept:  map[string]int{},
		busy:  make(chan struct{}, 1),
		log:   logr.Discard(),
	}
	e.guard = &diskGuard{svc: svc, threshold: opts.DiskThresholdPercent, interval: opts.DiskCheckInterval,
		clock: opts.Clock, statfs: opts.statfs, fs: opts.ImageFs, holdUnknown: opts.HoldWhenLevelUnknown}
	e.wake = sync.NewCond(&e.mu)
	return e
}

// Start runs pulls until ctx ends, then cancels running pulls and returns
// once they have finished. It logs through ctx's logr logger, if any. It
// fits controller-runtime's manager.Runnable.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("pull engine already started")
	}
	e.started, e.ctx = true, ctx
	e.log = logr.FromContextOrDiscard(ctx).WithName("pullengine")
	e.mu.Unlock()

	stop := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		e.stopped = true
		if e.shareTimer != nil {
			e.shareTimer.Stop()
		}
		e.wake.Broadcast()
		e.mu.Unlock()
	})
	defer stop()
	if e.content != nil {
		watching := make(chan struct{})
		go func() { defer close(watching); e.watch(ctx) }()
		defer func() { <-watching }()
	}
	e.puller.Run(e.next)
	return nil
}

// NeedLeaderElection tells controller-runtime's manager to run the engine
// on every agent: each node pulls for itself.
func (e *Engine) NeedLeaderElection() bool { return false }

// logger is Start's logger, or a discarding one before Start.
func (e *Engine) logger() logr.Logger {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log
}

// next hands the Puller the highest-priority queued job whose repository
// has no pull under way, blocking until there is one or the engine stops.
func (e *Engine) next() (func(), bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j, siblings := e.popRunnableLocked()
	if j == nil {
		return nil, false
	}
	e.metrics.pullsQueued.Dec()
	ctx, cancel := context.WithCancelCause(e.ctx)
	j.running, j.cancel = true, cancel
	return func() { e.run(ctx, j, siblings) }, true
}

// Enqueue asks for req's image to be pulled and says where it stands. An
// image already queued or pulling is not queued twice (a queued one takes
// the new priority, timeout and keyring); one backing off with the same
// credentials is not queued at all. Invalid references and a full disk are
// answered at once, without a job.
func (e *Engine) Enqueue(ctx context.Context, req Request) Status {
	return e.submit(ctx, []Request{req}, false)[0]
}

// Sync makes the set of images to pull exactly reqs: each is enqueued (see
// Enqueue), and queued or running pulls of any other image are cancelled,
// and results of other images forgotten. Pass every image that should be
// pulling now (missing, or due a refresh); one already present need not be
// passed. It returns the status of each request, in order; for the same
// image twice, the later request's priority wins. The requests enter the
// queue together, so the first pull to start is the one that comes first
// among all of them, and an image named by tag and by digest in one Sync
// is pulled once (see repo.go).
func (e *Engine) Sync(ctx context.Context, reqs []Request) []Status {
	out := e.submit(ctx, reqs, true)
	e.backoff.gc()
	return out
}

// admitted is a request that passed the checks made outside the lock.
type admitted struct {
	req   Request
	ref   imageref.Reference
	creds []Credential
}

// submit queues reqs in one step under the lock, so that no pull starts
// between two of them; with exclusive, jobs and results of images not in
// reqs are dropped in the same step.
func (e *Engine) submit(ctx context.Context, reqs []Request, exclusive bool) []Status {
	out := make([]Status, len(reqs))
	ok := make([]admitted, len(reqs))
	for i, req := range reqs {
		ref, err := imageref.Parse(req.Image)
		if err != nil {
			out[i] = e.invalid(req.Image, err)
			continue
		}
		if u, blocked := e.guard.check(ctx); blocked {
			out[i] = e.diskBlocked(req.Image, ref, u)
			continue
		}
		ok[i] = admitted{req: req, ref: ref, creds: req.Keyring.Lookup(ref)}
	}
	e.mu.Lock()
	for i, a := range ok {
		if !a.ref.IsZero() {
			out[i] = e.enqueueLocked(a)
		}
	}
	var dropped []*job
	if exclusive {
		dropped = e.dropOthersLocked(out)
	}
	e.wake.Signal()
	e.mu.Unlock()
	for _, j := range dropped {
		e.finishCanceled(j)
	}
	e.shareSlots() // a share may now wait on another's slots
	return out
}

// enqueueLocked queues one admitted request, or merges it into its image's
// job.
func (e *Engine) enqueueLocked(a admitted) Status {
	key := a.ref.String()
	bkey := backoffKey(key, a.creds)
	if j, ok := e.jobs[key]; ok {
		if j.notWanted {
			// Still stopping after a cancel: queue a successor for when
			// it has, taking over a paused pull's count and bytes.
			n := e.newJob(a.ref, a.req, a.creds, bkey)
			if old := j.successor; old != nil {
				n.carryOn(old)
			}
			j.successor = n
			return Status{Image: a.req.Image, Ref: key, State: pull.StateQueued}
		}
		e.update(j, a.req, a.creds)
		return j.status()
	}
	if last, ok := e.last[key]; ok && last.Succeeded() && last.Tag == a.req.Tag && !a.req.MissingSince.IsZero() && last.Finished.After(a.req.MissingSince) {
		return Status{Image: a.req.Image, Ref: key, State: pull.StatePulled, Last: &last, Tag: last.Tag}
	}
	if last, ok := e.last[key]; ok && isNoRoom(last.Err) && last.RetryAt.After(e.clock.Now()) {
		// Too big for the room there was: not tried again before the
		// disk guard's next reading.
		return Status{Image: a.req.Image, Ref: key, State: pull.StateFailed, RetryAt: last.RetryAt, Last: &last, Tag: last.Tag}
	}
	if until, ok := e.backoff.retryAt(bkey); ok {
		return Status{Image: a.req.Image, Ref: key, State: pull.StateBackOff, RetryAt: until, Last: e.lastCopy(key), Tag: a.req.Tag}
	}
	j := e.newJob(a.ref, a.req, a.creds, bkey)
	e.addJobLocked(j)
	return j.status()
}

// dropOthersLocked cancels the jobs and forgets the results of every image
// not among statuses, returning the queued jobs it removed for the caller
// to report outside the lock.
func (e *Engine) dropOthersLocked(statuses []Status) []*job {
	want := make(map[string]bool, len(statuses))
	for _, s := range statuses {
		want[s.Ref] = true
	}
	var dropped []*job
	for key := range e.jobs {
		if !want[key] {
			if j, _ := e.cancelLocked(key); j != nil {
				dropped = append(dropped, j)
			}
		}
	}
	for key := range e.last {
		if !want[key] {
			delete(e.last, key)
		}
	}
	return dropped
}

// update refreshes a queued job with the latest request for its image.
func (e *Engine) update(j *job, req Request, creds []Credential) {
	if j.running {
		return
	}
	if req.Priority != j.priority {
		// Its turn was given among the old priority's. Another share
		// alone keeps the turn: the job does not lose its place.
		j.turn = e.turns.give(req.Priority, req.Share)
	}
	j.priority, j.timeout, j.ownTimeout, j.share = req.Priority, e.timeoutOf(req), req.Timeout > 0, req.Share
	j.creds, j.backoffKey, j.tag = creds, backoffKey(j.ref.String(), creds), req.Tag
	if j.index >= 0 { // not parked behind its repository's pull
		heap.Fix(&e.queue, j.index)
	}
}

// Cancel drops image's queued pull or cancels its running one, and forgets
// its last result. It reports whether there was a pull to cancel.
func (e *Engine) Cancel(image string) bool {
	ref, err := imageref.Parse(image)
	if err != nil {
		return false
	}
	e.mu.Lock()
	delete(e.last, ref.String())
	dropped, ok := e.cancelLocked(ref.String())
	e.mu.Unlock()
	if dropped != nil {
		e.finishCanceled(dropped)
	}
	return ok
}

// cancelLocked cancels key's job. A queued job is removed and returned, for
// the caller to report outside the lock; a running one is told to stop and
// reports itself when its pull returns.
func (e *Engine) cancelLocked(key string) (*job, bool) {
	j, ok := e.jobs[key]
	if !ok {
		return nil, false
	}
	if j.running {
		if j.successor != nil {
			e.unkeepLocked(j.successor)
		}
		j.notWanted, j.successor = true, nil
		j.cancel(errNotWanted)
		return nil, true
	}
	e.removeQueuedLocked(j)
	return j, true
}
