package pullengine

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/imageref"
)

// ImageService is the part of the CRI image service the engine uses.
// *criclient.Client implements it.
type ImageService interface {
	// ListImages lists every image the runtime holds.
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	// ImageStatus returns the image ref names, or nil if absent.
	ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error)
	// PullImage pulls ref with auth (nil: anonymous) and returns the
	// runtime's image reference (ID).
	PullImage(ctx context.Context, ref string, auth *runtimeapi.AuthConfig) (string, error)
	// ImageFsInfo reports the filesystems holding images.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// CredentialProvider supplies node-wide logins for an image at the moment
// it is pulled, as the kubelet's credential-provider plugins do (see
// pkg/credprovider). The engine asks it once per pull attempt, after the
// pull secrets' logins, so a secret's login is tried first, as the
// kubelet does.
type CredentialProvider interface {
	// Credentials returns the logins that apply to ref, most specific
	// first; none means no provider had any. An error names the failing
	// provider and why, never a credential; logins that other providers
	// gave come back beside it.
	Credentials(ctx context.Context, ref imageref.Reference) ([]Credential, error)
}

// Request asks for one image to be pulled.
type Request struct {
	// Image is the reference as the user wrote it.
	Image string
	// Priority orders queued pulls: higher first, then the shares in
	// turn, then first come.
	Priority int32
	// Share names whose turn the request takes: within one priority,
	// queued pulls start in turn by share, each share's in the order they
	// came, so one share's many requests do not hold back another's few
	// (turns.go). The engine gives it no other meaning; "" is a share like
	// any other. A queued job keeps the turn it was given; a later request
	// of another priority gives it a new one, under the latest share.
	Share string
	// Timeout bounds the pull once started; 0 means Options.PullTimeout.
	Timeout time.Duration
	// Keyring holds the logins of the image's pull secrets; nil means
	// anonymous.
	Keyring *Keyring
	// MissingSince is when the caller last saw the image missing (or due
	// a refresh). A pull of it that succeeded after then is not repeated:
	// it ended while the caller was deciding. Zero always pulls.
	MissingSince time.Time
	// Tag is the caller's label for the credentials this request pulls
	// with (warmer's agent: the namespace whose pull secrets are in
	// Keyring, "" for node-wide ones). The engine keys jobs by image, not
	// by tag: a queued job takes the tag (and keyring) of the latest
	// request, a running one keeps its own, and its Result and Status say
	// which. A success under another tag does not count for MissingSince.
	Tag string
}

// Listener hears about pulls as they start and end. The engine calls it
// from its own goroutines, outside its locks: implementations must be safe
// for concurrent use and quick (enqueue work, record an event).
type Listener interface {
	// PullStarted is called when a pull leaves the queue and starts. A job
	// whose image another pull of its repository brought, or that a full
	// disk stops, finishes without it.
	PullStarted(ref imageref.Reference, tag string)
	// PullFinished is called once per job with its outcome, cancelled
	// jobs included.
	PullFinished(res Result)
}

// ListenerFuncs adapts functions to a Listener and YieldListener; nil
// functions are skipped.
type ListenerFuncs struct {
	Started  func(imageref.Reference, string)
	Finished func(Result)
	Yield    func(on bool)
}

var (
	_ Listener      = ListenerFuncs{}
	_ YieldListener = ListenerFuncs{}
)

// Yielding calls Yield if set.
func (l ListenerFuncs) Yielding(on bool) {
	if l.Yield != nil {
		l.Yield(on)
	}
}

// PullStarted calls Started if set.
func (l ListenerFuncs) PullStarted(ref imageref.Reference, tag string) {
	if l.Started != nil {
		l.Started(ref, tag)
	}
}

// PullFinished calls Finished if set.
func (l ListenerFuncs) PullFinished(res Result) {
	if l.Finished != nil {
		l.Finished(res)
	}
}
