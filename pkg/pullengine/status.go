package pullengine

import (
	"context"
	"fmt"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// Status says where image stands, and false when the engine knows nothing
// of it (never requested, cancelled, or forgotten by Sync).
func (e *Engine) Status(image string) (Status, bool) {
	ref, err := imageref.Parse(image)
	if err != nil {
		return e.invalid(image, err), true
	}
	key := ref.String()
	e.mu.Lock()
	defer e.mu.Unlock()
	if j, ok := e.jobs[key]; ok {
		return j.status(), true
	}
	last, ok := e.last[key]
	if !ok {
		return Status{}, false
	}
	s := Status{Image: image, Ref: key, Last: &last, State: pull.StateFailed, Tag: last.Tag}
	switch {
	case last.Succeeded():
		s.State = pull.StatePulled
	case last.RetryAt.After(e.clock.Now()):
		s.State, s.RetryAt = pull.StateBackOff, last.RetryAt
	}
	return s, true
}

// Presence lists the runtime's images once and indexes them.
func (e *Engine) Presence(ctx context.Context) (*Presence, error) {
	imgs, err := e.svc.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return NewPresence(imgs), nil
}

// DiskUsage is the image filesystem's fill level, as the disk guard last
// read it (refreshed when older than Options.DiskCheckInterval).
func (e *Engine) DiskUsage(ctx context.Context) DiskUsage {
	return e.guard.usage(ctx)
}

// lastCopy returns a copy of key's last result, or nil.
func (e *Engine) lastCopy(key string) *Result {
	if r, ok := e.last[key]; ok {
		return &r
	}
	return nil
}

// invalid answers a request whose reference does not parse. The runtime
// is not called: it would only say the same, later.
func (e *Engine) invalid(image string, err error) Status {
	res := Result{Image: image, Class: pull.ClassInvalidImageName, Message: truncate.String(err.Error(), MaxMessageBytes),
		Err: err, Finished: e.clock.Now()}
	return Status{Image: image, State: pull.StateFailed, Last: &res}
}

// diskBlocked answers a request while the disk guard holds pulls back.
func (e *Engine) diskBlocked(image string, ref imageref.Reference, u DiskUsage) Status {
	now := e.clock.Now()
	res := Result{Image: image, Ref: ref.String(), Class: pull.ClassDiskPressure, Message: e.guard.message(u), Finished: now}
	return Status{Image: image, Ref: ref.String(), State: pull.StateFailed, RetryAt: now.Add(e.guard.interval), Last: &res}
}
