package pullengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warmer-dev/warmer/internal/bytesize"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// Causes of a pull's context ending early, to tell timeouts from
// cancellations when the runtime only says "context canceled".
var (
	errNotWanted = errors.New("pull no longer wanted")
	errTimedOut  = errors.New("pull timed out")
)

// stalled is the cause of a pull cancelled because its bytes stopped
// moving; it carries what the message says.
type stalled struct {
	after    time.Duration
	progress pull.Progress
}

func (s stalled) Error() string { return "pull stalled" }

// message says how far a stalled pull had come.
func (s stalled) message() string {
	p := s.progress
	if p.Phase == pull.PhaseUnpacking {
		return fmt.Sprintf("pull stalled: nothing unpacked for %s, at %d of %d layers unpacked (%s on disk)", s.after,
			p.LayersUnpacked, p.Layers, bytesize.IEC(p.Unpacked))
	}
	return fmt.Sprintf("pull stalled: no bytes arrived for %s, at %s of %s", s.after,
		bytesize.IEC(p.Done), bytesize.IEC(p.Total))
}

// job is one image's pull, from queueing to its result. Its fields are
// guarded by Engine.mu, except that run owns the running job's pull.
type job struct {
	ref        imageref.Reference
	priority   int32
	timeout    time.Duration
	creds      []Credential
	backoffKey string
	tag        string // the request's Tag
	share      string // the request's Share
	turn       uint64 // its place among its priority's shares (turns.go)
	seq        uint64
	index      int // in the queue; -1 when not queued

	running bool
	cancel  context.CancelCauseFunc
	// notWanted is set when the running job was cancelled as unwanted.
	notWanted bool
	// successor is queued when this job finishes: the image was wanted
	// again while its cancelled pull was still stopping.
	successor *job
	// startedAt is when its pull started (zero before); progress is the
	// watcher's last reading of it (progress.go).
	startedAt time.Time
	progress  *pull.Progress
	// moving says the watcher's last reading found it fetched more than
	// the one before; waiting, that a blob it writes had not grown since
	// the one before (sizes.go).
	moving, waiting bool
	// ended is set when its pull returned, succeeded when it brought the
	// image; counted is how much of what it fetched the metrics have.
	ended, succeeded bool
	counted          int64
	// pauses is how many times its image's pull was paused to yield
	// (yield.go); its successor carries it on. keptBy is the lease
	// holding the bytes its paused predecessor fetched (keep.go).
	pauses int
	keptBy string
	// sharePauses is how many times its image's pull was paused to give
	// its slot to another share (shares.go); its successor carries it on.
	sharePauses int
	// sizePauses is how many times its image's pull was paused to give
	// its slot to a smaller image's (sizes.go); size is its image's
	// compressed size when an earlier pull learnt it. Its successor
	// carries both on.
	sizePauses int
	size       int64
	// heldFor is the smaller image's job it was paused for, which it
	// waits for from heldSince (sizes.go); nil when none.
	heldFor   *job
	heldSince time.Time
	// ownTimeout says timeout is the request's own, not the engine's
	// default, which scales with the image's size (sizes.go).
	ownTimeout bool
	// atStart is the disk as its pull started (unpack.go).
	atStart unpackStart
}

func (e *Engine) newJob(ref imageref.Reference, req Request, creds []Credential, bkey string) *job {
	e.seq++
	if len(e.jobs) == 0 {
		e.turns.reset() // no job holds a turn
	}
	return &job{ref: ref, priority: req.Priority, timeout: e.timeoutOf(req), ownTimeout: req.Timeout > 0, creds: creds,
		backoffKey: bkey, tag: req.Tag, share: req.Share, turn: e.turns.give(req.Priority, req.Share), seq: e.seq, index: -1}
}

func (e *Engine) timeoutOf(req Request) time.Duration {
	if req.Timeout > 0 {
		return req.Timeout
	}
	return e.timeout
}

func (j *job) status() Status {
	s := Status{Image: j.ref.Original(), Ref: j.ref.String(), State: pull.StateQueued, Tag: j.tag}
	if j.running {
		s.State = pull.StatePulling
	}
	if j.progress != nil {
		p := *j.progress
		s.Progress = &p
	}
	return s
}

// run pulls under the job's timeout and reports the outcome. A job whose
// image a sibling pulled (see repo.go) and one a full disk stops end
// before they are announced as started.
func (e *Engine) run(ctx context.Context, j *job, siblings []string) {
	defer j.cancel(nil)
	if res, ok := e.pulledBySibling(ctx, j, siblings); ok {
		e.finish(j, res)
		return
	}
	if u, blocked := e.guard.check(ctx); blocked {
		e.finish(j, Result{Image: j.ref.Original(), Ref: j.ref.String(), Class: pull.ClassDiskPressure, Message: e.guard.message(u)})
		return
	}
	if res, held := e.heldForSize(ctx, j); held {
		e.finish(j, res)
		return
	}
	if e.yieldFirst(ctx, j) {
		return
	}
	// The clock's timer, not context.WithTimeout, so tests can move time.
	timer := e.deadline(j)
	e.metrics.pullsInFlight.Inc()
	e.listener.PullStarted(j.ref, j.tag)
	start := e.clock.Now()
	e.mu.Lock()
	j.startedAt = start
	e.mu.Unlock()
	e.noteStart(ctx, j)
	e.shareSlots() // a pull of a share with more than its slots may be paused now
	res := e.pull(ctx, j)
	res.Duration = e.clock.Since(start)
	e.lastLook(ctx, j, res, start)
	// Stopped before the result is published: a timeout must not fire
	// into a finished job.
	timer.Stop()
	e.metrics.pullsInFlight.Dec()
	e.finish(j, res)
}

// pull pulls with each credential candidate in turn and describes the
// pulled image.
func (e *Engine) pull(ctx context.Context, j *job) Result {
	res := Result{Image: j.ref.Original(), Ref: j.ref.String()}
	creds, provErr := e.candidates(ctx, j)
	imageRef, attempts, err := e.pullWithCredentials(ctx, j, creds)
	res.Attempts = attempts
	if err != nil {
		res.Class, res.Message, res.Err = e.failure(ctx, j, creds, err)
		if provErr != nil && res.Class == pull.ClassUnauthorized {
			// The refusal most likely comes from the plugin's missing
			// answer: say so first. Its error holds no credential.
			res.Class, res.Message = pull.ClassCredentialProviderFailed, provErr.Error()+"; then: "+res.Message
		}
		return res
	}
	res.ImageRef = imageRef
	if img, err := e.svc.ImageStatus(ctx, imageRef); err == nil && img != nil {
		res.Size, res.Digest = img.GetSize(), repoDigestFor(img, j.ref.Name())
	}
	return res
}

// candidates are the pull secrets' logins, then the credential
// providers', as the kubelet orders them. A provider's failure is logged
// and returned; the pull goes on with what there is, as the kubelet's does.
func (e *Engine) candidates(ctx context.Context, j *job) ([]Credential, error) {
	if e.provider == nil {
		return j.creds, nil
	}
	provided, err := e.provider.Credentials(ctx, j.ref)
	if err != nil {
		e.logger().Info("Credential provider failed; pulling without its credentials", "image", j.ref.Original(), "error", err.Error())
	}
	if len(provided) == 0 {
		return j.creds, err
	}
	out := make([]Credential, 0, len(j.creds)+len(provided))
	out = append(out, j.creds...)
	for _, c := range provided {
		if !hasLogin(out, c) {
			out = append(out, c)
		}
	}
	return out, err
}

// pullWithCredentials tries the candidates in order, moving on only when
// the registry refused one; with none, it pulls anonymously.
func (e *Engine) pullWithCredentials(ctx context.Context, j *job, creds []Credential) (string, int, error) {
	logger := e.logger().WithValues("image", j.ref.Original(), "ref", j.ref.String())
	if len(creds) == 0 {
		logger.V(1).Info("Pulling image", "credentials", "anonymous")
		ref, err := e.svc.PullImage(ctx, j.ref.String(), nil)
		return ref, 1, err
	}
	var err error
	for i, c := range creds {
		// The registry key says which entry is used; it is not secret.
		logger.V(1).Info("Pulling image", "credentials", redactUserinfo(c.Registry), "candidate", i+1, "of", len(creds))
		var ref string
		if ref, err = e.svc.PullImage(ctx, j.ref.String(), c.authConfig()); err == nil {
			return ref, i + 1, nil
		}
		if ctx.Err() != nil || Classify(err, j.names()...) != pull.ClassUnauthorized {
			return "", i + 1, err
		}
	}
	return "", len(creds), err
}

// failure classifies a failed pull; a context ended by the engine speaks
// louder than the runtime's error.
func (e *Engine) failure(ctx context.Context, j *job, creds []Credential, err error) (Class, string, error) {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errTimedOut):
			return pull.ClassTimeout, fmt.Sprintf("pull did not finish within %s", j.timeout), err
		case errors.Is(cause, errNotWanted):
			return pull.ClassCanceled, "pull cancelled: image no longer wanted", err
		case errors.Is(cause, errYield):
			return pull.ClassCanceled, "pull paused: the runtime pulls for someone else (a starting Pod); queued again", err
		case errors.Is(cause, errSize):
			return pull.ClassCanceled, "pull paused: large images' pulls held every slot while a smaller image's pull waited; queued again", err
		case errors.Is(cause, errShare):
			return pull.ClassCanceled, "pull paused: its share held more than its fair number of pull slots while another's pull waited; queued again", err
		case errors.As(cause, new(stalled)):
			var s stalled
			errors.As(cause, &s)
			return pull.ClassStalled, s.message(), err
		case isNoRoom(cause):
			return pull.ClassDiskPressure, cause.Error(), cause
		default:
			return pull.ClassCanceled, "pull cancelled: agent stopping", err
		}
	}
	class := Classify(err, j.names()...)
	msg := redact(Message(err), creds)
	if shown := StatusMessage(class, msg); shown != msg {
		e.logger().Info("Registry not reached; the status says only that", "image", j.ref.String(), "error", msg)
		return class, shown, err
	}
	return class, msg, err
}

// names are the spellings of the image a runtime message may quote.
func (j *job) names() []string {
	return []string{j.ref.String(), j.ref.Original(), j.ref.Name(), j.ref.Path()}
}

// redact removes passwords from a runtime message, in case a runtime or
// registry ever echoes one. Very short passwords are left alone: blanking
// them would garble ordinary words and hide nothing.
func redact(msg string, creds []Credential) string {
	for _, c := range creds {
		if len(c.Password) >= 4 {
			msg = strings.ReplaceAll(msg, c.Password, redacted)
		}
	}
	return msg
}

// carryOn gives n, a successor queued in place of old while their image's
// paused pull stops, what a successor carries for its image: the pauses
// counted against it, its known size, the lease keeping its bytes, and
// the smaller image's pull it is held back for (sizes.go: the agent asks
// again on every pass, and a pull started now would queue its layers in
// the runtime before that pull's).
func (n *job) carryOn(old *job) {
	n.pauses, n.sharePauses, n.sizePauses, n.size, n.keptBy = old.pauses, old.sharePauses, old.sizePauses, old.size, old.keptBy
	n.heldFor, n.heldSince = old.heldFor, old.heldSince
}
