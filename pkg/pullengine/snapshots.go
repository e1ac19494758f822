package pullengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// SnapshotView is what the engine reads of the runtime's snapshots to
// tell what a pull unpacked, when the disk's level alone cannot say
// whether it or someone else took the room (unpack.go). *criclient.Snapshots
// implements it, on containerd; CRI-O and cri-dockerd have none.
type SnapshotView interface {
	// Unpacked is how many bytes the snapshots being unpacked for the
	// layers of chainIDs take so far.
	Unpacked(ctx context.Context, chainIDs []string) (int64, error)
}

// unpackedBy measures what the pull of t unpacked so far, by its layers'
// chain IDs (from its config, read once); false when there is no view or
// no answer.
func (e *Engine) unpackedBy(ctx context.Context, t *track) (int64, bool) {
	if e.snapshots == nil || len(t.blobs) == 0 {
		return 0, false
	}
	if t.chains == nil {
		raw, err := e.content.Read(ctx, t.blobs[0].digest, maxManifestBytes)
		if err != nil {
			return 0, false
		}
		if t.chains, err = chainIDs(raw); err != nil {
			e.logger().V(1).Info("Image config unread; its unpack is not measured", "image", t.ref.String(), "error", err.Error())
			return 0, false
		}
	}
	n, err := e.snapshots.Unpacked(ctx, t.chains)
	if err != nil {
		e.logger().V(1).Info("Reading the runtime's snapshots failed", "error", err.Error())
		return 0, false
	}
	return n, true
}

// chainIDs reads an image config's layer diff IDs and returns the chain
// IDs the runtime names their snapshots by: the first layer's is its diff
// ID, each next one the digest of the one before, a space, and its diff ID
// (the OCI image spec's ChainID).
func chainIDs(config []byte) ([]string, error) {
	var c struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, err
	}
	if len(c.RootFS.DiffIDs) == 0 {
		return nil, fmt.Errorf("names no layers")
	}
	out := make([]string, len(c.RootFS.DiffIDs))
	for i, d := range c.RootFS.DiffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out, nil
}

// UnpackView is a SnapshotView that also shows how far an image's layers
// are unpacked, for a pull's progress to say so. *criclient.Snapshots
// implements it.
type UnpackView interface {
	// Progress is how many of the layers of chainIDs are unpacked, and
	// the bytes they and those being unpacked take so far.
	Progress(ctx context.Context, chainIDs []string) (layers int, bytes int64, err error)
}

// readUnpack reads how far t's layers are unpacked, once its config is
// in; nothing where the runtime shows no unpacking, or on an error (the
// reading is left as it was).
func (e *Engine) readUnpack(ctx context.Context, t *track, now time.Time) {
	view, ok := e.snapshots.(UnpackView)
	if !ok || !t.p.Known || len(t.blobs) == 0 {
		return
	}
	if t.chains == nil {
		if !t.held[t.blobs[0].digest] {
			return
		}
		raw, err := e.content.Read(ctx, t.blobs[0].digest, maxManifestBytes)
		if err != nil {
			return
		}
		if t.chains, err = chainIDs(raw); err != nil {
			t.chains = []string{} // read, and useless: not read again
			return
		}
	}
	if len(t.chains) == 0 {
		return
	}
	layers, bytes, err := view.Progress(ctx, t.chains)
	if err != nil {
		e.logger().V(1).Info("Reading the runtime's snapshots failed; unpack progress not updated", "error", err.Error())
		return
	}
	t.unpacked(len(t.chains), layers, bytes, now)
}
