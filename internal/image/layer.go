package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: the numeric uid and gid of distroless's "nonroot", so
// an image built here and one built from the Dockerfile run alike, and
// runAsNonRoot can check the user without a passwd lookup.
const (
	UID = 65532
	GID = 65532
)

// BinaryPath is where the binary lives in the image: the Dockerfile's
// COPY destination and the entry point.
const BinaryPath = "/warmer"

// The account files, as distroless's static image has them: root (the
// agent may run as uid 0 to reach a root-owned runtime socket), nobody and
// nonroot. No shell: the image has none.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// entry is one file or directory of the layer.
type entry struct {
	name string
	mode int64
	dir  bool
	uid  int
	body []byte
}

// layerFiles lists the layer's contents in the order they are written:
// parents before children, the same order every time.
func layerFiles(binary []byte) []entry {
	return []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: UID},
		// Sticky and world-writable, as /tmp is everywhere; the manifests
		// mount an emptyDir or keep the root filesystem read-only anyway.
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: BinaryPath[1:], mode: 0o755, body: binary},
	}
}

// newLayer packs the binary at binPath and the account files into one
// gzip-compressed OCI layer whose every time is modTime.
func newLayer(binPath string, modTime time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range layerFiles(bin) {
		if err := writeEntry(tw, e, modTime); err != nil {
			return nil, fmt.Errorf("packing %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(bytesOpener(buf.Bytes()), tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// writeEntry writes one entry in the PAX format with no owner names, so
// that the bytes depend only on the entry.
func writeEntry(tw *tar.Writer, e entry, modTime time.Time) error {
	h := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.uid,
		ModTime: modTime.Truncate(time.Second),
		Format:  tar.FormatPAX,
	}
	if e.dir {
		h.Typeflag = tar.TypeDir
	} else {
		h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(e.body)
	return err
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}
