package criclient

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error a Client call returns matches exactly one of
// the first group with errors.Is and still wraps the original error, so its
// message and gRPC status stay available.
var (
	// ErrUnavailable: the runtime could not be reached (no socket, refused
	// connection, runtime restarting), gRPC code Unavailable.
	ErrUnavailable = errors.New("CRI runtime unavailable")
	// ErrNotFound: the runtime answered NotFound (for a pull: unknown
	// repository, tag or digest, or no manifest for this platform).
	ErrNotFound = errors.New("not found")
	// ErrDeadline: the call's timeout or the caller's deadline expired.
	ErrDeadline = errors.New("CRI call deadline exceeded")
	// ErrCanceled: the caller cancelled the call.
	ErrCanceled = errors.New("CRI call canceled")
	// ErrUnimplemented: the runtime does not implement the call.
	ErrUnimplemented = errors.New("CRI call not implemented by the runtime")
	// ErrInvalidArgument: the runtime rejected the request's arguments.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrPermissionDenied: the runtime refused the caller (PermissionDenied
	// or Unauthenticated). Registry authentication failures are not this:
	// containerd reports those with code Unknown.
	ErrPermissionDenied = errors.New("CRI call permission denied")
	// ErrResourceExhausted: the runtime ran out of something (or a message
	// exceeded the size limit).
	ErrResourceExhausted = errors.New("CRI resource exhausted")
	// ErrRuntime: any other failure (code Unknown, Internal, ...). containerd
	// answers most pull failures this way; read the message to tell them
	// apart.
	ErrRuntime = errors.New("CRI runtime error")
)

// Errors returned before any call is made.
var (
	// ErrEmptyReference: an image call was asked for an empty reference.
	ErrEmptyReference = errors.New("empty image reference")
	// ErrNoEndpoint: discovery found none of the candidate sockets.
	ErrNoEndpoint = errors.New("no CRI socket found")
	// ErrInvalidEndpoint: the endpoint is not a unix socket path or URL.
	ErrInvalidEndpoint = errors.New("invalid CRI endpoint")
)

// Error is a failed CRI call. It matches its Kind and its original error with
// errors.Is and errors.As.
type Error struct {
	// Op is the CRI call, e.g. "PullImage".
	Op string
	// Kind is one of the package's sentinel errors.
	Kind error
	// Err is the original error, usually a gRPC status error.
	Err error
}

// Error keeps the original message and names the call.
func (e *Error) Error() string {
	return e.Op + ": " + e.Err.Error()
}

// Unwrap exposes both the sentinel and the original error.
func (e *Error) Unwrap() []error {
	return []error{e.Kind, e.Err}
}

// wrap normalises err from call op into an *Error, or returns nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Kind: kindOf(err), Err: err}
}

// kindOf maps a gRPC status code, or a context error that never reached
// gRPC, to a sentinel.
func kindOf(err error) error {
	if s, ok := status.FromError(err); ok {
		return kindOfCode(s.Code())
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrDeadline
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	}
	return ErrRuntime
}

func kindOfCode(c codes.Code) error {
	switch c {
	case codes.Unavailable:
		return ErrUnavailable
	case codes.NotFound:
		return ErrNotFound
	case codes.DeadlineExceeded:
		return ErrDeadline
	case codes.Canceled:
		return ErrCanceled
	case codes.Unimplemented:
		return ErrUnimplemented
	case codes.InvalidArgument:
		return ErrInvalidArgument
	case codes.PermissionDenied, codes.Unauthenticated:
		return ErrPermissionDenied
	case codes.ResourceExhausted:
		return ErrResourceExhausted
	}
	return ErrRuntime
}
