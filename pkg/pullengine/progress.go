package pullengine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// ContentView is what the engine reads of the runtime's content store to
// follow its pulls' bytes: CRI says nothing of a pull until it ends.
// *criclient.ContentStore implements it.
type ContentView interface {
	// Ingests lists the blobs being written.
	Ingests(ctx context.Context) ([]content.Ingest, error)
	// Manifests lists the manifests fetched from repo of host.
	Manifests(ctx context.Context, host, repo string) ([]content.Blob, error)
	// Blob describes a blob held in full; false when none is.
	Blob(ctx context.Context, digest string) (content.Blob, bool, error)
	// Read returns a blob of at most limit bytes.
	Read(ctx context.Context, digest string, limit int64) ([]byte, error)
}

// maxManifestBytes bounds the manifest read: the registries' own limit
// for manifests is 4 MiB.
const maxManifestBytes = 4 << 20

// rateWeight is the share of the newest reading in the smoothed rate.
const rateWeight = 0.3

// track follows one pull's bytes. It belongs to the engine's watcher
// goroutine; what readers see is the Progress it copies out.
type track struct {
	ref     imageref.Reference
	started time.Time
	// manifest is the pull's manifest once found, and blobs what it
	// names: config first, then layers.
	manifest string
	blobs    []blobSize
	held     map[string]bool // blobs the store holds in full
	p        pull.Progress
	readAt   time.Time // of the last reading that counted bytes
	// committed is the size of the blobs committed since the pull
	// started; written holds the blobs seen being written, which count
	// as committed by this pull once held, with the offset last read.
	committed int64
	written   map[string]int64
	// chains are its layers' chain IDs, once read (snapshots.go).
	chains []string
	// moving says the last reading found it fetched more than the one
	// before; waiting, that a blob of it being written had not grown
	// since the one before (sizes.go).
	moving, waiting bool
	// unpackAt is when the unpacking was last read.
	unpackAt time.Time
	// alone is the first reading of the unpacking with every blob in,
	// and last the latest: the stretch the unpack has to itself
	// (rates.go).
	alone, last unpackReading
}

type blobSize struct {
	digest string
	size   int64
}

func newTrack(ref imageref.Reference, started time.Time) *track {
	return &track{ref: ref, started: started, held: map[string]bool{}, written: map[string]int64{}, p: pull.Progress{MovedAt: started}}
}

// update takes one reading: it finds the pull's manifest while unknown,
// then counts the bytes of its blobs, held or being written (ingests).
// An error leaves the progress as it was.
func (t *track) update(ctx context.Context, view ContentView, ingests []content.Ingest, now time.Time) error {
	if t.manifest == "" {
		if err := t.findManifest(ctx, view); err != nil || t.manifest == "" {
			return err
		}
	}
	writing := make(map[string]int64, len(ingests))
	for _, in := range ingests {
		writing[in.Digest] = in.Offset
	}
	var done, writ int64
	waiting := false
	for _, b := range t.blobs {
		last, seen := t.written[b.digest]
		n, ingest, err := t.bytesOf(ctx, view, b, writing)
		if err != nil {
			return err
		}
		done += n
		if ingest {
			writ += n
			waiting = waiting || (seen && n <= last)
		}
	}
	t.count(done, now)
	t.phase(now)
	// Moving: what it fetched grew since the last reading. A pull that
	// waits for the runtime's downloads may hold open ingests that do
	// not grow (containerd 2).
	t.moving = t.committed+writ > t.p.Fetched
	t.waiting = waiting
	t.p.Fetched = t.committed + writ
	return nil
}

// bytesOf is how much of b is in: all of it once held, else what its
// ingest has written (ingest set).
func (t *track) bytesOf(ctx context.Context, view ContentView, b blobSize, writing map[string]int64) (n int64, ingest bool, err error) {
	if t.held[b.digest] {
		return b.size, false, nil
	}
	if n, ok := writing[b.digest]; ok {
		n = min(n, b.size)
		t.written[b.digest] = n
		return n, true, nil
	}
	info, ok, err := view.Blob(ctx, b.digest)
	if err != nil || !ok {
		return 0, false, err
	}
	t.held[b.digest] = true
	if _, seen := t.written[b.digest]; seen || !info.CreatedAt.Before(t.started) {
		t.committed += b.size
	}
	return b.size, false, nil
}

// phase moves the pull to Unpacking once every blob is in; the unpack's
// stall clock starts then.
func (t *track) phase(now time.Time) {
	if t.p.Done < t.p.Total {
		t.p.Phase = pull.PhaseDownloading
		return
	}
	if t.p.Phase != pull.PhaseUnpacking {
		t.p.Phase, t.p.UnpackMovedAt = pull.PhaseUnpacking, now
	}
}

// unpacked records a reading of the unpacking: of layers, unpacked are,
// and bytes take what they and those being unpacked hold.
//
// A reading fewer than the one before is taken as the one before: while
// containerd commits a layer, its snapshots list can leave the layer out
// (its metadata and its snapshotter answer from separate transactions,
// and the commit is seconds on a busy disk), though its files stay where
// they were on disk; readings went down by a layer and more on the test
// bed, on containerd 1.6 and 2. Only a snapshot dropped for good (an
// unpack aborted, and the pull with it) takes bytes off the disk: the
// reading may then stay above the disk until the pull ends.
func (t *track) unpacked(layers, unpacked int, bytes int64, now time.Time) {
	p := &t.p
	unpacked, bytes = max(unpacked, p.LayersUnpacked), max(bytes, p.Unpacked)
	if p.UnpackMovedAt.IsZero() {
		p.UnpackMovedAt = now
	}
	if bytes > p.Unpacked || unpacked > p.LayersUnpacked {
		p.UnpackMovedAt = now
	}
	if p.UnpackSeen && now.After(t.unpackAt) {
		inst := max(float64(bytes-p.Unpacked)/now.Sub(t.unpackAt).Seconds(), 0)
		if p.UnpackRate == 0 {
			p.UnpackRate = inst
		} else {
			p.UnpackRate = (1-rateWeight)*p.UnpackRate + rateWeight*inst
		}
	}
	p.UnpackSeen, p.Layers, p.LayersUnpacked, p.Unpacked = true, layers, unpacked, bytes
	t.unpackAt = now
	t.unpackAlone(bytes, now)
}

// count records a reading of done bytes at now.
func (t *track) count(done int64, now time.Time) {
	if done > t.p.Done {
		t.p.MovedAt = now
	}
	if t.p.Known && now.After(t.readAt) {
		inst := float64(done-t.p.Done) / now.Sub(t.readAt).Seconds()
		if t.p.Rate == 0 {
			t.p.Rate = max(inst, 0)
		} else {
			t.p.Rate = max((1-rateWeight)*t.p.Rate+rateWeight*inst, 0)
		}
	}
	t.p.Known, t.p.Done, t.readAt = true, done, now
}

// findManifest looks for the pull's manifest among those of its
// repository: the one of its digest when pulled by digest, else the one
// labelled most recently since the pull started (containerd labels a
// manifest with its source each time a pull fetches or finds it). The
// engine pulls one image of a repository at a time, so no other of its
// pulls labels the repository's manifests meanwhile; a kubelet pull of
// another tag of the same repository at the same moment could.
func (t *track) findManifest(ctx context.Context, view ContentView) error {
	ms, err := view.Manifests(ctx, t.ref.Domain(), t.ref.Path())
	if err != nil {
		return err
	}
	var pick content.Blob
	for _, m := range ms {
		if m.UpdatedAt.Before(t.started) {
			continue
		}
		if m.Digest == t.ref.Digest() || pick.Digest == "" || m.UpdatedAt.After(pick.UpdatedAt) {
			pick = m
		}
		if m.Digest == t.ref.Digest() {
			break
		}
	}
	if pick.Digest == "" {
		return nil
	}
	raw, err := view.Read(ctx, pick.Digest, maxManifestBytes)
	if err != nil {
		return err
	}
	blobs, err := manifestBlobs(raw)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", pick.Digest, err)
	}
	t.manifest, t.blobs = pick.Digest, blobs
	for _, b := range blobs {
		t.p.Total += b.size
	}
	return nil
}

// manifestBlobs reads the config and layers an image manifest (Docker's
// schema 2 or OCI's) names.
func manifestBlobs(raw []byte) ([]blobSize, error) {
	var m struct {
		Config struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.Config.Digest == "" {
		return nil, fmt.Errorf("names no config")
	}
	out := []blobSize{{m.Config.Digest, m.Config.Size}}
	for _, l := range m.Layers {
		out = append(out, blobSize{l.Digest, l.Size})
	}
	return out, nil
}
