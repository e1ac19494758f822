package image

import (
	"archive/tar"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the layout's index.json entry that name the image. OCI's
// ref.name is what skopeo and crane read; containerd's own is what `ctr
// images import` (1.6 and 2.x alike) names the image by, so the imported
// image carries the same full name either way.
const (
	AnnotationRefName        = "org.opencontainers.image.ref.name"
	AnnotationContainerdName = "io.containerd.image.name"
)

// WriteOCI writes idx as an OCI image layout in a tar file at path: the
// oci-layout marker, an index.json whose one entry points at idx and names
// it ref (for example ghcr.io/warmer-dev/warmer:v0.1.0), and every blob
// once under blobs/sha256/, in digest order. The file's bytes depend only
// on idx and ref.
func WriteOCI(path string, idx v1.ImageIndex, ref string) (err error) {
	blobs, err := indexBlobs(idx)
	if err != nil {
		return err
	}
	top, err := partial.Descriptor(idx)
	if err != nil {
		return err
	}
	top.Annotations = map[string]string{AnnotationRefName: ref, AnnotationContainerdName: ref}
	layoutIndex, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{*top}})
	if err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := writeFile(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := writeFile(tw, "index.json", layoutIndex); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := writeBlob(tw, b); err != nil {
			return fmt.Errorf("writing blob %s: %w", b.digest, err)
		}
	}
	return tw.Close()
}

// blob is one content-addressed file of the layout.
type blob struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

// indexBlobs lists the blobs of idx and of the images it holds, each once,
// sorted by digest.
func indexBlobs(idx v1.ImageIndex) ([]blob, error) {
	seen := map[v1.Hash]blob{}
	add := func(d v1.Hash, size int64, open func() (io.ReadCloser, error)) {
		seen[d] = blob{digest: d, size: size, open: open}
	}
	if err := addRaw(add, idx); err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		if err := imageBlobs(add, img); err != nil {
			return nil, err
		}
	}
	out := make([]blob, 0, len(seen))
	for _, b := range seen {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b blob) int { return cmp.Compare(a.digest.String(), b.digest.String()) })
	return out, nil
}

type addFunc func(d v1.Hash, size int64, open func() (io.ReadCloser, error))

// imageBlobs adds an image's manifest, configuration and layers.
func imageBlobs(add addFunc, img v1.Image) error {
	if err := addRaw(add, img); err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	add(cfgName, int64(len(cfg)), bytesOpener(cfg))
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		add(d, size, l.Compressed)
	}
	return nil
}

// addRaw adds a manifest or index by its raw bytes.
func addRaw(add addFunc, m partial.WithRawManifest) error {
	raw, err := m.RawManifest()
	if err != nil {
		return err
	}
	d, _, err := v1.SHA256(bytesReader(raw))
	if err != nil {
		return err
	}
	add(d, int64(len(raw)), bytesOpener(raw))
	return nil
}

func writeBlob(tw *tar.Writer, b blob) error {
	if b.digest.Algorithm != "sha256" {
		return fmt.Errorf("unexpected digest algorithm %q", b.digest.Algorithm)
	}
	rc, err := b.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := tw.WriteHeader(fileHeader("blobs/sha256/"+b.digest.Hex, b.size)); err != nil {
		return err
	}
	n, err := io.Copy(tw, rc)
	if err == nil && n != b.size {
		err = fmt.Errorf("%d bytes, the descriptor says %d", n, b.size)
	}
	return err
}

func writeFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(fileHeader(name, int64(len(body)))); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

// fileHeader is a regular file's header with nothing from the build
// machine in it: root-owned, read-only to others, at the epoch.
func fileHeader(name string, size int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
}
