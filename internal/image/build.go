package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultPlatforms are the platforms of the release image.
var DefaultPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// Options say what to build. Version is required.
type Options struct {
	// Dir is the root of warmer's module (where go.mod and cmd/warmer
	// are); empty means the working directory.
	Dir string
	// Version is stamped into the binary (`warmer version`).
	Version string
	// Platforms to build; nil means DefaultPlatforms.
	Platforms []v1.Platform
	// Created is the images' creation time and every file's time in them;
	// the zero value means the Unix epoch. A commit's time
	// (SOURCE_DATE_EPOCH) keeps the build reproducible and the date useful.
	Created time.Time
	// Go is the go command; empty means "go" from PATH.
	Go string
}

func (o Options) withDefaults() (Options, error) {
	if o.Version == "" {
		return o, errors.New("image: no version to stamp")
	}
	if o.Platforms == nil {
		o.Platforms = DefaultPlatforms
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC().Truncate(time.Second)
	if o.Go == "" {
		o.Go = "go"
	}
	return o, nil
}

// Build compiles the binary for every platform and returns the image index.
func Build(ctx context.Context, opts Options) (v1.ImageIndex, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "warmer-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	binaries := make(map[string]string, len(opts.Platforms))
	for _, p := range opts.Platforms {
		if binaries[p.String()], err = compile(ctx, opts, p, dir); err != nil {
			return nil, err
		}
	}
	return Assemble(binaries, opts)
}

// Assemble makes the image index from binaries already built, keyed by
// platform ("linux/amd64"), one image per platform of opts in that order.
// Layers are read into memory here, so the files may go afterwards.
func Assemble(binaries map[string]string, opts Options) (v1.ImageIndex, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var adds []mutate.IndexAddendum
	for _, p := range opts.Platforms {
		bin, ok := binaries[p.String()]
		if !ok {
			return nil, fmt.Errorf("image: no binary for %s", p)
		}
		img, err := platformImage(bin, p, opts.Created)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

// plainImage is an image whose index entry carries no artifactType.
// go-containerregistry writes the configuration's media type there, which
// OCI 1.1 reserves for artifacts; tools that predate it (Debian 12's skopeo
// among them) drop the field when they copy the index and so change its
// digest. Docker's and distroless's indexes leave it out too.
type plainImage struct{ v1.Image }

// ArtifactType is empty: the image is no artifact.
func (plainImage) ArtifactType() (string, error) { return "", nil }

// platformImage is one platform's image: one layer, and a configuration
// that runs the binary as the non-root user.
func platformImage(bin string, p v1.Platform, created time.Time) (v1.Image, error) {
	layer, err := newLayer(bin, created)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "warmer hack/image: " + BinaryPath + ", /etc/passwd, /etc/group, /tmp", Comment: "built without a container engine"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{BinaryPath},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"},
	}
	return mutate.ConfigFile(img, cf)
}
