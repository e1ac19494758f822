package pullengine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/warmer-dev/warmer/internal/truncate"
)

// classRule maps message fragments (lower case) to a class.
type classRule struct {
	class     Class
	fragments []string
}

// messageRules are tried in order, on the lower-cased message. containerd
// reports most failures with code Unknown, so the message is what tells
// them apart (see testdata/cri-pull-errors.txt, containerd's answers
// captured on the test bed); so does CRI-O, whose answers test/crio
// checks on a real CRI-O. Order matters: a platform mismatch also says
// "not found", a 401 during resolution also says "failed to resolve".
var messageRules = []classRule{
	{pull.ClassInvalidImageName, []string{"invalid reference format", "failed to parse image reference"}},
	{pull.ClassNoMatchingPlatform, []string{"no match for platform", "no matching manifest for", "does not match the specified platform",
		"no image found in image index for architecture", "no image found in manifest list for architecture"}},
	{pull.ClassSignatureValidationFailed, []string{"signature validation", "signature verification", "source image rejected", "no signature", "invalid signature"}},
	{pull.ClassDiskPressure, []string{"no space left on device", "disk quota exceeded"}},
	{pull.ClassTimeout, []string{"context deadline exceeded"}},
	{pull.ClassCanceled, []string{"context canceled"}},
	{pull.ClassUnauthorized, []string{"401 unauthorized", "unauthorized:", "authentication required", "403 forbidden",
		"pull access denied", "denied: ", "insufficient_scope", "no basic auth credentials"}},
	// Before RegistryUnavailable: a rate limit is not an outage.
	{pull.ClassRateLimited, []string{"429 too many requests", "toomanyrequests", "pull rate limit"}},
	{pull.ClassRegistryUnavailable, append(slices.Clone(httpUnavailable), networkFailures...)},
	{pull.ClassNotFound, []string{": not found", "manifest unknown", "404 not found", "name unknown", "blob unknown"}},
}

// networkFailures are what a runtime says when no HTTP answer came back:
// no route, no name, no connection, no TLS, or something that is not
// HTTP on the port (whose banner the runtime quotes).
var networkFailures = []string{"connection refused", "no such host", "i/o timeout", "network is unreachable",
	"connection reset", "tls handshake timeout", "x509: ", "tls: ", "server gave http response to https client",
	"server misbehaving", "temporary failure in name resolution", "malformed http response",
	"unexpected eof", "dial tcp"}

// httpUnavailable are a registry's own HTTP answers that it cannot serve.
var httpUnavailable = []string{"500 internal server error", "502 bad gateway", "503 service unavailable", "504 gateway timeout"}

// unreachedMessage stands in for the runtime's words when a pull got no
// HTTP answer, or lost its connection.
const unreachedMessage = "the registry could not be reached, or the connection broke (a network, DNS or TLS failure, or no HTTP answer); the agent's log has the runtime's error"

// StatusMessage is what a failure of class says where an ImageWarm's owner
// reads it (a NodeWarm's images, events, the ImageWarm's failures), given
// the runtime's message msg. A registry's HTTP answers keep its words. A
// pull that reached no registry answering in HTTP gets a fixed sentence:
// whoever may write an ImageWarm names any host and port, and the
// runtime's words (connection refused, a TLS error, a service's banner)
// would tell them what listens there, from inside the cluster. The agent's
// log keeps the runtime's words.
func StatusMessage(class Class, msg string) string {
	if class != pull.ClassRegistryUnavailable {
		return msg
	}
	lower := strings.ToLower(msg)
	if slices.ContainsFunc(httpUnavailable, func(f string) bool { return strings.Contains(lower, f) }) {
		return msg
	}
	return unreachedMessage
}

// Classify maps an error from PullImage to a class, by gRPC code and
// message. images are the reference spellings the pull used; they are
// blanked out of the message first, so that a repository called
// "team/unauthorized" does not read as an auth failure.
func Classify(err error, images ...string) Class {
	if err == nil {
		return ""
	}
	code, msg := statusOf(err)
	if c, ok := classifyCode(err, code, msg); ok {
		return c
	}
	lower := strings.ToLower(scrub(msg, images))
	for _, r := range messageRules {
		for _, f := range r.fragments {
			if strings.Contains(lower, f) {
				return r.class
			}
		}
	}
	if code == codes.NotFound {
		return pull.ClassNotFound
	}
	return pull.ClassErrImagePull
}

// classifyCode settles what the code or the CRI standard errors say
// unambiguously, before the message is read.
func classifyCode(err error, code codes.Code, msg string) (Class, bool) {
	switch {
	case errors.Is(err, crierrors.ErrRegistryUnavailable),
		strings.HasPrefix(msg, crierrors.ErrRegistryUnavailable.Error()):
		return pull.ClassRegistryUnavailable, true
	case errors.Is(err, crierrors.ErrSignatureValidationFailed),
		strings.HasPrefix(msg, crierrors.ErrSignatureValidationFailed.Error()):
		return pull.ClassSignatureValidationFailed, true
	case code == codes.Canceled || errors.Is(err, context.Canceled):
		return pull.ClassCanceled, true
	case code == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return pull.ClassTimeout, true
	case code == codes.Unavailable:
		// The CRI socket itself is unreachable: no registry was asked, so
		// "connection refused" in the message is not the registry's.
		return pull.ClassErrImagePull, true
	}
	return "", false
}

// statusOf finds the gRPC status in err's chain, returning its code and its
// own message (without the "rpc error: code = ... desc =" decoration), or
// Unknown and err's message.
func statusOf(err error) (codes.Code, string) {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) && gs.GRPCStatus() != nil {
		s := gs.GRPCStatus()
		return s.Code(), s.Message()
	}
	return codes.Unknown, err.Error()
}

// Message is the human-readable text of a pull error: the runtime's own
// message when there is one, bounded to MaxMessageBytes.
func Message(err error) string {
	if err == nil {
		return ""
	}
	_, msg := statusOf(err)
	return truncate.String(msg, MaxMessageBytes)
}

// scrub blanks image names out of msg. Only names with a slash are used:
// normalised ones always have one, and a bare word such as "found" would
// blank out the very fragments the rules look for.
func scrub(msg string, images []string) string {
	images = slices.Clone(images)
	// Longest first, so that a name does not cut its own tagged form.
	slices.SortFunc(images, func(a, b string) int { return len(b) - len(a) })
	for _, img := range images {
		if strings.Contains(img, "/") {
			msg = strings.ReplaceAll(msg, img, "<image>")
		}
	}
	return msg
}
