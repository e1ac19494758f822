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
// there. Compressed bytes do not bound what a layer unpacks to (a few
// megabytes of gzip can hold gigabytes of zeros): unpack.go watches the
// disk while pulls write and keeps what an image was seen to unpack to.

// unpackFactor bounds the room an image takes per compressed byte
// fetched: the blob itself, and its unpacked layer.
const unpackFactor = 2

// noRoom is the cause of a pull cancelled, or held, because its image
// cannot fit.
type noRoom struct {
	need
	room, reserved int64
	mountpoint     string
	threshold      int
}

// need is what the engine knows of an image's size: the compressed bytes
// it has still to fetch and, once a pull of it was seen unpacking past
// the room, at least how much it unpacks to.
type need struct{ fetch, unpacked int64 }

// bytes is the room the image is taken to need: unpacked is a size it
// was seen to pass, so it needs more.
func (n need) bytes() int64 {
	if n.unpacked > 0 {
		return max(unpackFactor*n.fetch, n.unpacked+1)
	}
	return unpackFactor * n.fetch
}

func (n noRoom) Error() string {
	fs := "the image filesystem"
	if n.mountpoint != "" {
		fs = n.mountpoint
	}
	msg := fmt.Sprintf("the image needs about %s (%d times the %s it has still to fetch, compressed), but %s has %s left below the %d%% pull threshold",
		bytesize.IEC(unpackFactor*n.fetch), unpackFactor, bytesize.IEC(n.fetch), fs, bytesize.IEC(max(n.room, 0)), n.threshold)
	if n.unpacked > 0 {
		msg = fmt.Sprintf("the image unpacked past the room: to more than %s from %s compressed, and %s has %s left below the %d%% pull threshold",
			bytesize.IEC(n.unpacked), bytesize.IEC(n.fetch), fs, bytesize.IEC(max(n.room, 0)), n.threshold)
	}
	if n.reserved > 0 {
		msg += fmt.Sprintf(", %s of it taken by pulls under way", bytesize.IEC(n.reserved))
	}
	return msg + "; waiting for space"
}

// isNoRoom says whether a result's error is a refusal for size.
func isNoRoom(err error) bool { return errors.As(err, new(noRoom)) }

// fits checks what j's image needs against the room below the threshold,
// less what the other running pulls will still take; it says why not.
func (e *Engine) fits(ctx context.Context, j *job, need need) (noRoom, bool) {
	e.mu.Lock()
	reserved := e.reservedLocked(j)
	e.mu.Unlock()
	u := e.guard.usage(ctx)
	room, known := e.guard.room(u)
	n := noRoom{need: need, room: room, reserved: reserved, mountpoint: u.Mountpoint, threshold: e.guard.threshold}
	return n, !known || need.bytes() <= room-reserved
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
	need, known := e.needs[key]
	e.mu.Unlock()
	if !known {
		return Result{}, false
	}
	n, ok := e.fits(ctx, j, need)
	if ok {
		return Result{}, false
	}
	return Result{Image: j.ref.Original(), Ref: key, Class: pull.ClassDiskPressure, Message: n.Error(), Err: n}, true
}

// checkFit cancels a running pull, once its size is known, that cannot
// fit, and keeps the size for its image's next pulls.
func (e *Engine) checkFit(ctx context.Context, j *job, t *track) {
	n, ok := e.fits(ctx, j, need{fetch: max(t.p.Total-t.p.Done, 0)})
	if ok {
		return
	}
	e.mu.Lock()
	e.needs[j.ref.String()] = n.need
	e.mu.Unlock()
	j.cancel(n)
}

// forgetSizeLocked drops what the engine knew of ref's size once it is pulled.
func (e *Engine) forgetSizeLocked(ref imageref.Reference) { delete(e.needs, ref.String()) }
