package pull

import "time"

// MaxMessageBytes bounds Result.Message: runtimes can return whole HTML
// error pages from registries, and the message ends up in object status.
const MaxMessageBytes = 1024

// Result is the outcome of one pull job.
type Result struct {
	// Image is the reference as first requested (several spellings of one
	// image share a job; Ref tells them apart from other images).
	Image string
	// Ref is the normalised reference that was pulled.
	Ref string
	// ImageRef is the runtime's image ID after a successful pull.
	ImageRef string
	// Digest is the repo digest ("name@sha256:...") the runtime reports
	// for Ref's repository, if any.
	Digest string
	// Size is the image size the runtime reports, in bytes; 0 if unknown.
	Size uint64
	// Fetched is what the pull fetched from the registry, compressed, as
	// the runtime's content store showed it; 0 when nothing, or when the
	// engine has no view of the store.
	Fetched int64
	// Duration is the wall time from the job's start to its end, all
	// credential attempts included, queueing excluded.
	Duration time.Duration
	// Class is empty on success, the failure class otherwise.
	Class Class
	// Message explains a failure, at most MaxMessageBytes long; it never
	// holds credentials.
	Message string
	// Attempts counts PullImage calls (one per credential candidate
	// tried); 0 for a success without one, when another pull of the
	// repository brought the image (a digest pulled by its tag).
	Attempts int
	// RetryAt is when back-off lets this image be pulled again; zero when
	// there is no back-off.
	RetryAt time.Time
	// Finished is when the job ended.
	Finished time.Time
	// Tag is the Tag of the request whose credentials the job pulled
	// with.
	Tag string
	// Err is the underlying error (the runtime's gRPC status, for
	// status.Code); nil on success. Its text is not bounded: show Message.
	Err error
}

// Succeeded reports whether the pull succeeded.
func (r Result) Succeeded() bool { return r.Class == "" }

// Status is the engine's view of one image.
type Status struct {
	// Image is the reference as requested.
	Image string
	// Ref is the normalised reference; empty if Image is invalid.
	Ref string
	// State is where the image stands.
	State State
	// RetryAt is when a blocked image may be tried again (BackOff, or
	// Failed for disk pressure); zero otherwise.
	RetryAt time.Time
	// Last is the last finished pull of this image, if the engine still
	// holds it.
	Last *Result
	// Tag is the Tag of the job queued or running, else of Last.
	Tag string
	// Progress is how far a pull under way has come; nil when the engine
	// has no view of the runtime's content store, or has not read it
	// since the pull started.
	Progress *Progress
}
