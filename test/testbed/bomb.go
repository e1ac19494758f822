package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// bombChunk is the run of zeros one gzip member holds: a gzip stream may
// be several members one after the other, which every runtime's
// decompressor reads as one, so the layer is built by compressing the
// chunk once and repeating it, not by compressing gigabytes.
const bombChunk = 64 << 20

// BombImage makes a gzip bomb: an image of one layer, a tar of one file
// of unpacked zero bytes (rounded up to whole 64 MiB), that takes a few
// megabytes to fetch. Its digests are the real ones, so a runtime that
// unpacks it all finds nothing wrong.
func BombImage(t TB, unpacked int64) v1.Image {
	t.Helper()
	l, err := newBombLayer((unpacked + bombChunk - 1) / bombChunk)
	if err != nil {
		t.Fatalf("making a bomb layer: %v", err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatalf("adding the bomb layer: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatalf("setting config: %v", err)
	}
	return img
}

// bombLayer is a v1.Layer whose gzip stream is head, then body repeated
// chunks times, then tail: the tar header, the file's zeros, and the
// archive's closing blocks, each its own gzip member.
type bombLayer struct {
	head, body, tail []byte
	chunks           int64
	digest, diffID   v1.Hash
	size             int64
}

var _ v1.Layer = &bombLayer{}

func newBombLayer(chunks int64) (*bombLayer, error) {
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	// The header alone: the file's bytes are the repeated members.
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Mode: 0o644, Size: chunks * bombChunk, Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	l := &bombLayer{chunks: chunks}
	var err error
	if l.head, err = gzipped(hdr.Bytes()); err != nil {
		return nil, err
	}
	if l.body, err = gzipped(make([]byte, bombChunk)); err != nil {
		return nil, err
	}
	// A tar ends with two zero blocks.
	if l.tail, err = gzipped(make([]byte, 2*512)); err != nil {
		return nil, err
	}
	l.size = int64(len(l.head)) + chunks*int64(len(l.body)) + int64(len(l.tail))
	if l.digest, err = hashOf(l.compressed()); err != nil {
		return nil, err
	}
	if l.diffID, err = hashOf(io.MultiReader(bytes.NewReader(hdr.Bytes()), io.LimitReader(zeroReader{}, chunks*bombChunk+2*512))); err != nil {
		return nil, err
	}
	return l, nil
}

func gzipped(b []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func hashOf(r io.Reader) (v1.Hash, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return v1.Hash{}, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// compressed reads the layer's gzip stream.
func (l *bombLayer) compressed() io.Reader {
	rs := []io.Reader{bytes.NewReader(l.head)}
	for range l.chunks {
		rs = append(rs, bytes.NewReader(l.body))
	}
	return io.MultiReader(append(rs, bytes.NewReader(l.tail))...)
}

// Digest is the compressed stream's digest.
func (l *bombLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the tar's digest.
func (l *bombLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Compressed reads the gzip stream.
func (l *bombLayer) Compressed() (io.ReadCloser, error) { return io.NopCloser(l.compressed()), nil }

// Uncompressed reads the tar: gigabytes.
func (l *bombLayer) Uncompressed() (io.ReadCloser, error) {
	zr, err := gzip.NewReader(l.compressed())
	if err != nil {
		return nil, fmt.Errorf("reading the bomb layer: %w", err)
	}
	return zr, nil
}

// Size is the compressed size.
func (l *bombLayer) Size() (int64, error) { return l.size, nil }

// MediaType is Docker's gzip layer.
func (l *bombLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
