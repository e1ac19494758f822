package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// MB is a megabyte as the test images count it.
const MB = 1 << 20

// Image is an image pushed to a test registry.
type Image struct {
	// Ref is the full reference, e.g. 127.0.0.1:41234/test/small:v1.
	Ref string
	// Digest is the manifest (or index) digest, "sha256:...".
	Digest string
	// Size is the sum of the compressed layer sizes of the image for this
	// machine's platform (0 for an index with no such child).
	Size int64
	// Files are an artifact's blobs by the file name each carries
	// (org.opencontainers.image.title) to its digest; nil for an image.
	Files map[string]string
}

// ImageOptions shape a generated image.
type ImageOptions struct {
	// LayerSize is the size of each layer's random payload in bytes.
	LayerSize int64
	// Layers is the number of layers (at least 1).
	Layers int
	// Arch is the image's architecture; amd64 when empty.
	Arch string
	// OCI selects OCI media types instead of Docker's.
	OCI bool
	// Zeros adds a file of that many zero bytes to each layer, and
	// compresses the layer: it then costs little to fetch and much to
	// unpack.
	Zeros int64
}

// RandomImage makes an image of random, incompressible layers, distinct from
// every other image this returns.
func RandomImage(t TB, o ImageOptions) v1.Image {
	t.Helper()
	if o.Layers < 1 {
		o.Layers = 1
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	base := empty.Image
	if o.OCI {
		base = mutate.MediaType(base, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	}
	img := base
	for i := 0; i < o.Layers; i++ {
		layer, err := randomLayer(o.LayerSize, o.Zeros)
		if err != nil {
			t.Fatalf("making a layer: %v", err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatalf("adding a layer: %v", err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("reading config: %v", err)
	}
	cf = cf.DeepCopy()
	// An image built from nothing has no platform; containerd needs one to
	// pick it out of an index.
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Config.Labels = map[string]string{"dev.warmer.testbed": "true"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatalf("setting config: %v", err)
	}
	return img
}

// randomLayer is a gzip layer holding one file of random bytes, and with
// zeros, a second file of that many zero bytes. The gzip stream is stored,
// not compressed, unless there are zeros: random data does not shrink,
// and compressing 100 MB of it would cost seconds per test.
func randomLayer(size, zeros int64) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := addFile(tw, "payload", size, rand.NewChaCha8([32]byte(randomSeed()))); err != nil {
		return nil, err
	}
	level := gzip.NoCompression
	if zeros > 0 {
		if err := addFile(tw, "zeros", zeros, zeroReader{}); err != nil {
			return nil, err
		}
		level = gzip.BestSpeed
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(level))
}

// addFile writes a file of size bytes from src, under a name of prefix
// no other layer shares.
func addFile(tw *tar.Writer, prefix string, size int64, src io.Reader) error {
	hdr := &tar.Header{Name: fmt.Sprintf("%s-%016x", prefix, rand.Uint64()), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := io.CopyN(tw, src, size)
	return err
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

func randomSeed() []byte {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	return seed
}

// Push uploads img as repoTag ("test/small:v1") and returns its reference.
func (r *Registry) Push(t TB, repoTag string, img v1.Image) Image {
	t.Helper()
	ref := r.reference(t, repoTag)
	if err := remote.Write(ref, img, r.remoteOptions()...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Image{Ref: ref.String(), Digest: d.String(), Size: layerBytes(t, img)}
}

// PushIndex uploads a multi-platform index of fresh random images, one per
// architecture, as repoTag.
func (r *Registry) PushIndex(t TB, repoTag string, layerSize int64, archs ...string) Image {
	t.Helper()
	idx := v1.ImageIndex(empty.Index)
	var size int64
	for _, arch := range archs {
		img := RandomImage(t, ImageOptions{LayerSize: layerSize, Arch: arch})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
		if arch == "amd64" {
			size = layerBytes(t, img)
		}
	}
	ref := r.reference(t, repoTag)
	if err := remote.WriteIndex(ref, idx, r.remoteOptions()...); err != nil {
		t.Fatalf("pushing index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Image{Ref: ref.String(), Digest: d.String(), Size: size}
}

// PushRandom generates and pushes a random image.
func (r *Registry) PushRandom(t TB, repoTag string, o ImageOptions) Image {
	t.Helper()
	return r.Push(t, repoTag, RandomImage(t, o))
}

// Ref is the full reference of repoTag on this registry.
func (r *Registry) Ref(repoTag string) string { return r.Host + "/" + repoTag }

func (r *Registry) reference(t TB, repoTag string) name.Reference {
	t.Helper()
	// Loopback registries speak plain HTTP.
	ref, err := name.ParseReference(r.Ref(repoTag), name.Insecure)
	if err != nil {
		t.Fatalf("parsing %s: %v", repoTag, err)
	}
	return ref
}

func (r *Registry) remoteOptions() []remote.Option {
	if !r.Authenticated() {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: r.opts.Username, Password: r.opts.Password})}
}

func layerBytes(t TB, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}
