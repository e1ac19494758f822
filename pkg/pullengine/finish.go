package pullengine

import (
	"container/heap"
)

// backsOff reports whether a failure of class c should delay the next
// attempt. Cancellations and disk pressure say nothing about the image,
// and an invalid name never reaches the runtime.
func backsOff(c Class) bool {
	switch c {
	case "", ClassCanceled, ClassDiskPressure, ClassInvalidImageName:
		return false
	}
	return true
}

// finish records a job's outcome: back-off, last result, metrics, log and
// listener, in that order, so that a listener reacting to the result sees
// the engine already updated.
func (e *Engine) finish(j *job, res Result) {
	res.Finished = e.clock.Now()
	key := j.ref.String()
	e.mu.Lock()
	delete(e.jobs, key)
	switch {
	case res.Succeeded():
		e.backoff.reset(j.backoffKey)
	case backsOff(res.Class):
		res.RetryAt = e.backoff.failed(j.backoffKey)
	}
	if res.Class == ClassCanceled {
		delete(e.last, key)
	} else {
		e.last[key] = res
	}
	if n := j.successor; n != nil {
		e.jobs[key] = n
		heap.Push(&e.queue, n)
		pullsQueued.Inc()
		e.wake.Signal()
	}
	e.mu.Unlock()
	e.report(res)
}

// finishCanceled reports a queued job dropped before it started.
func (e *Engine) finishCanceled(j *job) {
	e.report(Result{Image: j.ref.Original(), Ref: j.ref.String(), Class: ClassCanceled,
		Message: "pull cancelled: image no longer wanted", Finished: e.clock.Now()})
}

// report publishes a finished job.
func (e *Engine) report(res Result) {
	observe(res)
	logger := e.logger().WithValues("image", res.Image, "ref", res.Ref, "attempts", res.Attempts, "duration", res.Duration)
	switch {
	case res.Succeeded():
		logger.Info("Pulled image", "imageRef", res.ImageRef, "size", res.Size)
	case res.Class == ClassCanceled:
		logger.V(1).Info("Pull cancelled", "message", res.Message)
	default:
		logger.Info("Failed to pull image", "reason", string(res.Class), "message", res.Message, "retryAt", res.RetryAt)
	}
	e.listener.PullFinished(res)
}
