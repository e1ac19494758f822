package criclient

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A failed call returns the runtime's gRPC status error, wrapped with the
// call's name ("PullImage: rpc error: ..."); status.Code reads its code
// through the wrap. The client adds no sentinel of its own for call
// failures: the code is what callers branch on (pullengine.Classify reads
// it, with the message), and a cancelled or timed-out call has gRPC's codes
// Canceled and DeadlineExceeded.

// ErrInvalidEndpoint: the endpoint is not a unix socket path or URL. It is
// a configuration error, which retrying does not cure.
var ErrInvalidEndpoint = errors.New("invalid CRI endpoint")

// errNoEndpoint: discovery found none of the candidate sockets (yet: a
// booting node may start the runtime after the agent).
var errNoEndpoint = errors.New("no CRI socket found")

// errEmptyReference refuses an empty reference before any call, with the
// code the runtime would give a bad argument.
var errEmptyReference = status.Error(codes.InvalidArgument, "empty image reference")

// wrap names the call that failed, or returns nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
