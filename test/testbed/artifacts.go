package testbed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the test bed's artifacts: a model's weights as OCI 1.1
// describes an artifact (an artifactType, the empty config, blobs of a
// type no runtime unpacks), under a vendor prefix of warmer's own.
const (
	ArtifactType      = "application/vnd.warmer.testbed.model.v1"
	ArtifactBlobType  = "application/vnd.warmer.testbed.weights.v1.raw"
	emptyConfigType   = "application/vnd.oci.empty.v1+json"
	emptyConfigBlob   = "{}"
	ociManifestSchema = 2
	// titleAnnotation names the file a blob becomes where a runtime mounts
	// an artifact (CRI-O mounts no blob without a name), as ORAS sets it.
	titleAnnotation = "org.opencontainers.image.title"
)

// ArtifactOptions shape a generated OCI artifact.
type ArtifactOptions struct {
	// Blobs is the number of blobs (at least 1), each BlobSize bytes of
	// random data.
	Blobs    int
	BlobSize int64
	// ConfigMediaType replaces the empty config's media type, for an
	// artifact of the older form that names its kind by its config (as
	// ModelPack's model config does); the config is then "{}" still.
	ConfigMediaType string
	// Untitled leaves the blobs without a file name (no
	// org.opencontainers.image.title), as a tool that names none pushes
	// them; Image.Files is then empty.
	Untitled bool
}

// PushArtifact generates an OCI artifact of random blobs, named
// weights-0.bin, weights-1.bin ... unless Untitled, and pushes it as
// repoTag. Image.Size is
// the sum of its blobs, Image.Files their names and digests.
func (r *Registry) PushArtifact(t TB, repoTag string, o ArtifactOptions) Image {
	t.Helper()
	if o.Blobs < 1 {
		o.Blobs = 1
	}
	ref := r.reference(t, repoTag)
	cfgType := types.MediaType(emptyConfigType)
	if o.ConfigMediaType != "" {
		cfgType = types.MediaType(o.ConfigMediaType)
	}
	cfg := static.NewLayer([]byte(emptyConfigBlob), cfgType)
	m := v1.Manifest{SchemaVersion: ociManifestSchema, MediaType: types.OCIManifestSchema1,
		ArtifactType: ArtifactType, Config: descriptor(t, cfg)}
	blobs := []v1.Layer{cfg}
	files := map[string]string{}
	for i := range o.Blobs {
		data := make([]byte, o.BlobSize)
		if _, err := io.ReadFull(rand.NewChaCha8([32]byte(randomSeed())), data); err != nil {
			t.Fatal(err)
		}
		b := static.NewLayer(data, ArtifactBlobType)
		blobs = append(blobs, b)
		desc := descriptor(t, b)
		if !o.Untitled {
			name := fmt.Sprintf("weights-%d.bin", i)
			desc.Annotations = map[string]string{titleAnnotation: name}
			files[name] = desc.Digest.String()
		}
		m.Layers = append(m.Layers, desc)
	}
	for _, b := range blobs {
		if err := remote.WriteLayer(ref.Context(), b, r.remoteOptions()...); err != nil {
			t.Fatalf("pushing a blob of %s: %v", ref, err)
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, ociManifest(raw), r.remoteOptions()...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return Image{Ref: ref.String(), Digest: d.String(), Size: int64(o.Blobs) * o.BlobSize, Files: files}
}

// descriptor describes a blob in a manifest.
func descriptor(t TB, l v1.Layer) v1.Descriptor {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	size, err := l.Size()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := l.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: d}
}

// ociManifest is a manifest's bytes, pushed as an OCI image manifest.
type ociManifest []byte

func (m ociManifest) RawManifest() ([]byte, error) { return m, nil }

func (m ociManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
