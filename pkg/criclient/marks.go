package criclient

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The kubelet keeps a record on the node's disk of the images it pulled
// with credentials, so that such an image is never taken for one the node
// came with. warmer keeps its own record on the image itself: a label on
// containerd's image record, set once a pull under a namespace's pull
// secrets brought it. The record outlives the agent (a restart, an
// upgrade) and the ImageWarm that asked, and goes with the image.
const (
	// SecretsLabel and SecretsValue mark an image record that warmer pulled
	// with a namespace's pull secrets.
	SecretsLabel = "warmer.dev/pulled-with-secrets"
	SecretsValue = "true"
)

// ErrCannotMark says the runtime offers no way to mark images.
var ErrCannotMark = errors.New("the container runtime cannot mark images")

// Marker marks the images warmer pulled with pull secrets, in containerd's
// image store. It is safe for concurrent use.
type Marker struct {
	labels imageLabels
}

// Marker returns the client's marker when the runtime is containerd and
// answers its images API, or an error wrapping ErrCannotMark that says why
// not.
func (c *Client) Marker(ctx context.Context) (*Marker, error) {
	if err := c.containerdOnly(ErrCannotMark); err != nil {
		return nil, err
	}
	m := &Marker{labels: newImageLabels(c.conn, c.timeout)}
	if _, err := m.Marked(ctx); err != nil {
		return nil, fmt.Errorf("%w: containerd's images API on %s: %w", ErrCannotMark, c.endpoint, err)
	}
	return m, nil
}

// Marked returns the digests ("sha256:...") that marked image records
// point at: the manifest or index digest CRI reports in an image's repo
// digests.
func (m *Marker) Marked(ctx context.Context) ([]string, error) {
	imgs, err := m.labels.list(ctx, SecretsLabel, SecretsValue)
	digests := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if d := img.GetTarget().GetDigest(); d != "" {
			digests = append(digests, d)
		}
	}
	return digests, err
}

// Mark marks the image name (containerd's name for it: the normalised
// reference CRI pulled it by) as pulled with pull secrets. It says false,
// without error, when the runtime has no image of that name.
func (m *Marker) Mark(ctx context.Context, name string) (bool, error) {
	img, err := m.labels.get(ctx, name)
	if img == nil || err != nil {
		return false, err
	}
	if img.GetLabels()[SecretsLabel] == SecretsValue {
		return true, nil
	}
	err = m.labels.set(ctx, img, map[string]string{SecretsLabel: SecretsValue}, SecretsLabel)
	if status.Code(err) == codes.NotFound { // removed since it was read
		return false, nil
	}
	return err == nil, err
}
