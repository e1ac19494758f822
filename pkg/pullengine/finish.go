package pullengine

import (
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// backsOff reports whether a failed result should delay the next attempt.
// Cancellations say nothing about the image, and an invalid name never
// reaches the runtime. Neither does a pull the disk guard refused: it waits
// for the guard's next reading instead. But when the runtime itself ran out
// of space, the guard had let the pull start and would let the next one
// start too (the partial layers are gone again by then): without a
// back-off the image was pulled again at once, dozens of times a second on
// the test bed, each attempt downloading layers that cannot fit.
func backsOff(res Result) bool {
	switch res.Class {
	case "", pull.ClassCanceled, pull.ClassInvalidImageName:
		return false
	case pull.ClassDiskPressure:
		// A pull refused for its size waits for room instead (fit.go).
		return res.Attempts > 0 && !isNoRoom(res.Err)
	}
	return true
}

// backoffFloorLocked is the least a failed pull of j waits before its
// next attempt: for a large image, as long as the attempt ran. The
// kubelet's schedule (10 s doubling to 5 min) was set for images that pull
// in seconds; a large image's attempt can run for many minutes, and a
// retry 10 s after a 20-minute failure would keep the node's link, disk
// and the registry busy with an image that fails, most of the time. With
// the floor a failing large image holds the node at most about half the
// time; a small image's schedule is the kubelet's.
func (e *Engine) backoffFloorLocked(j *job, res Result) time.Duration {
	if e.large <= 0 || e.sizeOfLocked(j) < e.large {
		return 0
	}
	return res.Duration
}

// finish records a job's outcome: back-off, last result, metrics, log and
// listener, in that order, so that a listener reacting to the result sees
// the engine already updated.
func (e *Engine) finish(j *job, res Result) {
	res.Finished, res.Tag = e.clock.Now(), j.tag
	key := j.ref.String()
	e.mu.Lock()
	j.ended, j.succeeded = true, res.Succeeded()
	var fetched int64
	if j.progress != nil {
		res.Fetched = j.progress.FetchedAtEnd(res.Succeeded())
		fetched = e.newlyFetchedLocked(j, res.Fetched)
	}
	delete(e.jobs, key)
	e.endPullLocked(j, res)
	switch {
	case res.Succeeded():
		e.backoff.reset(j.backoffKey)
		e.forgetSizeLocked(j.ref)
	case backsOff(res):
		res.RetryAt = e.backoff.failed(j.backoffKey, e.backoffFloorLocked(j, res))
	case isNoRoom(res.Err):
		// Not a back-off: the disk guard's next reading may find room.
		res.RetryAt = res.Finished.Add(e.guard.interval)
	}
	if res.Class == pull.ClassCanceled {
		delete(e.last, key)
	} else {
		e.last[key] = res
	}
	if n := j.successor; n != nil {
		e.addJobLocked(n)
	}
	e.unkeepLocked(j)
	e.wake.Signal()
	e.mu.Unlock()
	e.metrics.fetchedBytes.Add(float64(fetched))
	e.report(res)
}

// finishCanceled reports a queued job dropped before it started.
func (e *Engine) finishCanceled(j *job) {
	e.mu.Lock()
	e.unkeepLocked(j)
	e.mu.Unlock()
	e.report(Result{Image: j.ref.Original(), Ref: j.ref.String(), Class: pull.ClassCanceled,
		Message: "pull cancelled: image no longer wanted", Finished: e.clock.Now(), Tag: j.tag})
}

// report publishes a finished job.
func (e *Engine) report(res Result) {
	e.metrics.observe(res)
	logger := e.logger().WithValues("image", res.Image, "ref", res.Ref, "attempts", res.Attempts, "duration", res.Duration)
	switch {
	case res.Succeeded() && res.Attempts == 0:
		logger.V(1).Info("Image brought by another pull of its repository", "imageRef", res.ImageRef)
	case res.Succeeded():
		logger.Info("Pulled image", "imageRef", res.ImageRef, "size", res.Size)
	case res.Class == pull.ClassCanceled:
		logger.V(1).Info("Pull cancelled", "message", res.Message)
	default:
		logger.Info("Failed to pull image", "reason", string(res.Class), "message", res.Message, "retryAt", res.RetryAt)
	}
	e.listener.PullFinished(res)
}
