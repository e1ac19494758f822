package pullengine

import (
	"context"
	"errors"
	"fmt"

	"github.com/warmer-dev/warmer/internal/bytesize"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// An image whose size the engine knows is not pulled where it cannot fit.
// The size comes from the pull's manifest, as soon as the content store
// shows it (progress.go): what the pull still has to fetch, compressed,
// and as much again for unpacking it (the bound OpenShift's pinned image
// sets use), against the room left below the disk guard's threshold less
// what the other pulls under way will still take. A pull that cannot fit
// is cancelled before its layers fill the disk, and the size is kept: the
// image's next pulls wait, without asking the registry, until the room is
// there.

// unpackFactor bounds the room an image takes per compressed byte
// fetched: the blob itself, and its unpacked layer.
const unpackFactor = 2

// noRoom is the cause of a pull cancelled, or held, because its image
// cannot fit.
type noRoom struct {
	fetch, room, reserved int64
	mountpoint            string
	threshold             int
}

func (n noRoom) Error() string {
	fs := "the image filesystem"
	if n.mountpoint != "" {
		fs = n.mountpoint
	}
	msg := fmt.Sprintf("the image needs about %s (%d times the %s it has still to fetch, compressed), but %s has %s left below the %d%% pull threshold",
		bytesize.IEC(unpackFactor*n.fetch), unpackFactor, bytesize.IEC(n.fetch), fs, bytesize.IEC(max(n.room, 0)), n.threshold)
	if n.reserved > 0 {
		msg += fmt.Sprintf(", %s of it taken by pulls under way", bytesize.IEC(n.reserved))
	}
	return msg + "; waiting for space"
}

// isNoRoom says whether a result's error is a refusal for size.
func isNoRoom(err error) bool { return errors.As(err, new(noRoom)) }

// fits checks fetch more compressed bytes of j's image against the room
// below the threshold, less what the other running pulls will still
// take; it says why not.
func (e *Engine) fits(ctx context.Context, j *job, fetch int64) (noRoom, bool) {
	e.mu.Lock()
	reserved := e.reservedLocked(j)
	e.mu.Unlock()
	u := e.guard.usage(ctx)
	room, known := e.guard.room(u)
	n := noRoom{fetch: fetch, room: room, reserved: reserved, mountpoint: u.Mountpoint, threshold: e.guard.threshold}
	return n, !known || unpackFactor*fetch <= room-reserved
}

// reservedLocked is the room the running pulls other than skip will
// still take, by their last readings.
func (e *Engine) reservedLocked(skip *job) int64 {
	var n int64
	for _, j := range e.jobs {
		if j != skip && j.running && j.progress != nil && j.progress.Known {
			n += unpackFactor * max(j.progress.Total-j.progress.Done, 0)
		}
	}
	return n
}

// heldForSize answers a job whose image is known not to fit yet, before
// its pull starts: no back-off, the guard's next reading decides.
func (e *Engine) heldForSize(ctx context.Context, j *job) (Result, bool) {
	key := j.ref.String()
	e.mu.Lock()
	fetch, known := e.needs[key]
	e.mu.Unlock()
	if !known {
		return Result{}, false
	}
	n, ok := e.fits(ctx, j, fetch)
	if ok {
		return Result{}, false
	}
	return Result{Image: j.ref.Original(), Ref: key, Class: pull.ClassDiskPressure, Message: n.Error(), Err: n}, true
}

// checkFit cancels a running pull, once its size is known, that cannot
// fit, and keeps the size for its image's next pulls.
func (e *Engine) checkFit(ctx context.Context, j *job, t *track) {
	fetch := max(t.p.Total-t.p.Done, 0)
	n, ok := e.fits(ctx, j, fetch)
	if ok {
		return
	}
	e.mu.Lock()
	e.needs[j.ref.String()] = fetch
	e.mu.Unlock()
	j.cancel(n)
}

// forgetSizeLocked drops what the engine knew of ref's size once it is pulled.
func (e *Engine) forgetSizeLocked(ref imageref.Reference) { delete(e.needs, ref.String()) }
