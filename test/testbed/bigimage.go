package testbed

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// GB is a gigabyte as the test images count it.
const GB = 1 << 30

// BigImage makes an image of size bytes of random data in layers of
// layerSize (the last one takes what is left), for images of several GB:
// RandomImage holds its layers in memory, this generates each layer again
// from its seed whenever it is read, so an image costs only the
// registry's disk once pushed. Its layers are uncompressed OCI tar
// (application/vnd.oci.image.layer.v1.tar): random data does not shrink,
// and gzip, even stored, would cost a pass over every GB on both sides.
// So an image's download and its unpacked size are the same bytes.
func BigImage(t TB, size, layerSize int64) v1.Image {
	t.Helper()
	if size <= 0 || layerSize <= 0 {
		t.Fatalf("BigImage(%d, %d): sizes must be positive", size, layerSize)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for left := size; left > 0; left -= layerSize {
		l, err := newStreamLayer(min(left, layerSize))
		if err != nil {
			t.Fatalf("making a layer: %v", err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatalf("adding a layer: %v", err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("reading config: %v", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Labels = map[string]string{"dev.warmer.testbed": "true"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatalf("setting config: %v", err)
	}
	return img
}

// streamLayer is an uncompressed tar layer of one file of random bytes,
// written afresh from its seed on every read.
type streamLayer struct {
	seed   [32]byte
	name   string
	size   int64   // the file's bytes
	length int64   // the tar stream's bytes
	digest v1.Hash // of the tar stream, which is also its diff ID
}

var _ v1.Layer = (*streamLayer)(nil)

// newStreamLayer makes a layer of a size-byte file, reading it once to
// learn its digest and length.
func newStreamLayer(size int64) (*streamLayer, error) {
	l := &streamLayer{seed: [32]byte(randomSeed()), name: fmt.Sprintf("payload-%016x", rand.Uint64()), size: size}
	h := sha256.New()
	rc := l.open()
	defer rc.Close()
	n, err := io.Copy(h, rc)
	if err != nil {
		return nil, err
	}
	l.length = n
	l.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	return l, nil
}

// open streams the tar: a pipe its writer fills as it is read; closing
// the reader early ends the writer.
func (l *streamLayer) open() io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(l.write(pw)) }()
	return pr
}

func (l *streamLayer) write(w io.Writer) error {
	tw := tar.NewWriter(w)
	hdr := &tar.Header{Name: l.name, Mode: 0o644, Size: l.size, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, rand.NewChaCha8(l.seed), l.size); err != nil {
		return err
	}
	return tw.Close()
}

// Digest is the tar stream's digest.
func (l *streamLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the digest: the layer is not compressed.
func (l *streamLayer) DiffID() (v1.Hash, error) { return l.digest, nil }

// Compressed is the tar stream, as stored in the registry.
func (l *streamLayer) Compressed() (io.ReadCloser, error) { return l.open(), nil }

// Uncompressed is the same tar stream.
func (l *streamLayer) Uncompressed() (io.ReadCloser, error) { return l.open(), nil }

// Size is the tar stream's length.
func (l *streamLayer) Size() (int64, error) { return l.length, nil }

// MediaType is the uncompressed OCI layer's.
func (l *streamLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }

// SnapshotsDiskUsage is what the snapshotter's snapshots take on disk now,
// counted as du does (allocated blocks, each file once): what the layers
// unpacked so far take, read from the file system rather than asked of
// containerd, to hold containerd's own figures against.
func (c *Containerd) SnapshotsDiskUsage() (int64, error) {
	dir := filepath.Join(c.Dir, "root", "io.containerd.snapshotter.v1."+snapshotter(), "snapshots")
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed under the walk: a snapshot containerd dropped
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
