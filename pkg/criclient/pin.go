package criclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Pinning is outside CRI: CRI reports an image's pinned flag but has no call
// to set it. containerd (1.7 and later) reports an image pinned when one of
// its names in the CRI plugin's namespace carries the label
// io.cri-containerd.pinned=pinned, and its images API, served on the same
// socket as CRI, sets labels. So the pinner speaks that API over the CRI
// client's own connection.
//
// warmer marks every pin it makes with a label of its own, set in the same
// update as the pin label, and removes a pin only where its mark is: a pin
// that someone else made (the sandbox image, an operator's ctr label) is
// never touched, and an image someone else had pinned is not marked.
// containerd's update has no compare-and-set on labels, so a pin someone
// sets on the same name between warmer's read and its write is taken for
// warmer's own; nothing else pins names warmer wants on a node so fast.
const (
	// PinLabel and PinValue are the label containerd's CRI plugin reads as
	// "pinned".
	PinLabel = "io.cri-containerd.pinned"
	PinValue = "pinned"
	// MarkLabel and MarkValue mark a pin as warmer's.
	MarkLabel = "warmer.dev/pinned"
	MarkValue = "true"
	// criNamespace is the containerd namespace of the CRI plugin's images.
	criNamespace = "k8s.io"
	// namespaceHeader is the gRPC metadata key containerd takes the
	// namespace from.
	namespaceHeader = "containerd-namespace"
)

// ErrCannotPin says the runtime offers no way to pin images.
var ErrCannotPin = errors.New("the container runtime cannot pin images")

// PinResult is what Pin found and did.
type PinResult int

const (
	// Pinned: warmer pinned the name now.
	Pinned PinResult = iota
	// AlreadyMine: warmer had pinned it already.
	AlreadyMine
	// PinnedByOther: someone else pinned it; it was left as it was.
	PinnedByOther
	// NoSuchImage: the runtime has no image of that name (removed since).
	NoSuchImage
)

// Pinner pins and unpins images in containerd's image store. It is safe for
// concurrent use.
type Pinner struct {
	labels imageLabels
}

// Pinner returns the client's pinner when the runtime can pin, or an error
// wrapping ErrCannotPin that says why not: the runtime is not containerd,
// is a containerd that does not report pins to the kubelet (before 1.7),
// or does not answer its images API (a proxy in front of it serving only
// CRI, say).
func (c *Client) Pinner(ctx context.Context) (*Pinner, error) {
	if err := c.containerdOnly(ErrCannotPin); err != nil {
		return nil, err
	}
	ver := c.version.GetRuntimeVersion()
	if !atLeast(ver, 1, 7) {
		return nil, fmt.Errorf("%w: containerd %s does not report pinned images to the kubelet (1.7 and later do)", ErrCannotPin, ver)
	}
	p := newPinner(c.conn, c.timeout)
	if _, err := p.Mine(ctx); err != nil {
		return nil, fmt.Errorf("%w: containerd's images API on %s: %w", ErrCannotPin, c.endpoint, err)
	}
	return p, nil
}

func newPinner(conn grpc.ClientConnInterface, timeout time.Duration) *Pinner {
	return &Pinner{labels: newImageLabels(conn, timeout)}
}

// containerdOnly is nil on containerd, else an error wrapping sentinel
// that names the runtime: pins and the content store are containerd's
// own APIs.
func (c *Client) containerdOnly(sentinel error) error {
	if name := c.version.GetRuntimeName(); name != "containerd" {
		return fmt.Errorf("%w: runtime %s %s is not containerd", sentinel, name, c.version.GetRuntimeVersion())
	}
	return nil
}

// atLeast reports whether version ("v2.4.2", "1.7.0~ds1", "1.6.20") is at
// least major.minor. A version it cannot read counts as new enough: the
// images API check that follows still guards.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1][:digits(parts[1])])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}

// digits counts the leading decimal digits of s.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// Mine lists the image names that carry warmer's mark.
func (p *Pinner) Mine(ctx context.Context) ([]string, error) {
	imgs, err := p.labels.list(ctx, MarkLabel, MarkValue)
	names := make([]string, 0, len(imgs))
	for _, img := range imgs {
		names = append(names, img.GetName())
	}
	return names, err
}

// Pin pins the image name (containerd's name for it: the normalised
// reference CRI pulled it by) and marks the pin as warmer's, unless someone
// else pinned it.
func (p *Pinner) Pin(ctx context.Context, name string) (PinResult, error) {
	img, err := p.labels.get(ctx, name)
	if img == nil || err != nil {
		return NoSuchImage, err
	}
	labels := img.GetLabels()
	switch {
	case labels[MarkLabel] == MarkValue && labels[PinLabel] == PinValue:
		return AlreadyMine, nil
	case labels[PinLabel] == PinValue:
		return PinnedByOther, nil
	}
	err = p.labels.set(ctx, img, map[string]string{PinLabel: PinValue, MarkLabel: MarkValue}, PinLabel, MarkLabel)
	if status.Code(err) == codes.NotFound { // removed since it was read
		return NoSuchImage, nil
	}
	return Pinned, err
}

// Unpin removes the pin from the image name if warmer made it, and says
// whether it did. A name without warmer's mark, or gone, is left alone.
func (p *Pinner) Unpin(ctx context.Context, name string) (bool, error) {
	img, err := p.labels.get(ctx, name)
	if img == nil || err != nil || img.GetLabels()[MarkLabel] != MarkValue {
		return false, err
	}
	// Absent from the map, both labels are removed.
	err = p.labels.set(ctx, img, map[string]string{}, PinLabel, MarkLabel)
	if status.Code(err) == codes.NotFound { // removed since it was read
		return false, nil
	}
	return err == nil, err
}
