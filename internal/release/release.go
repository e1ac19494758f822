// Package release makes warmer's release artifacts from a commit (`make
// release`) and publishes them (`make publish`). Every artifact depends
// only on the source, the version, the registry named and the commit's
// time (SOURCE_DATE_EPOCH), so two builds of a commit give the same bytes
// (install.yaml also on the kubectl that renders it):
//
//   - install.yaml: every object of config/default, the image pinned by
//     digest as REGISTRY/warmer@sha256:...
//   - warmer-X.Y.Z.tgz: the Helm chart, its version, appVersion and image
//     digest set;
//   - warmer-image.oci.tar: the image index (one image per platform) as an
//     OCI layout tarball, the digest the other two name;
//   - warmer-OS-ARCH.cdx.json: a CycloneDX SBOM of each platform's binary
//     (its Go modules, from the binary's build information);
//   - kubectl-warmer_OS_ARCH.tar.gz: the kubectl plugin for each platform
//     people run kubectl on (plugin.go), and warmer-krew.yaml, krew's
//     manifest naming them with their sha256;
//   - SHA256SUMS over the files above.
//
// The digest is known before anything is pushed, since the index is built
// here; publishing pushes exactly these bytes. The tree is not changed: the
// version lives in dist/ (make set-release moves config/default's and the
// chart's defaults, as part of the procedure in docs/releasing.md).
package release

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/warmer-dev/warmer/internal/image"
)

// The files a release writes, besides the chart (ChartFile) and the SBOMs
// (SBOMFile).
const (
	InstallFile = "install.yaml"
	ImageFile   = "warmer-image.oci.tar"
	SumsFile    = "SHA256SUMS"
)

// versionRE is a release version: vMAJOR.MINOR.PATCH with an optional
// pre-release, as semver (and so Helm) takes it after the v.
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// Options say what release to make, and where.
type Options struct {
	// Dir is the root of warmer's checkout.
	Dir string
	// Version is vX.Y.Z[-pre].
	Version string
	// Registry is where the image and the chart go, e.g. ghcr.io/warmer-dev:
	// the image is Registry/warmer, the chart oci://Registry/charts/warmer.
	Registry string
	// Dist is the folder written; it must be absent or empty.
	Dist string
	// Platforms of the image; nil means image.DefaultPlatforms.
	Platforms []v1.Platform
	// PluginPlatforms of kubectl-warmer; nil means PluginPlatforms.
	PluginPlatforms []v1.Platform
	// Created is the images' and the archives' time (the commit's).
	Created time.Time
	// Kubectl renders config/default (kubectl kustomize); empty: "kubectl".
	Kubectl string
}

// Repository is the image's repository, Registry/warmer.
func (o Options) Repository() string { return strings.TrimSuffix(o.Registry, "/") + "/warmer" }

// ChartVersion is Version without its v, as Helm wants it.
func (o Options) ChartVersion() string { return strings.TrimPrefix(o.Version, "v") }

// ChartFile is the packaged chart's file name, as helm package names it.
func (o Options) ChartFile() string { return "warmer-" + o.ChartVersion() + ".tgz" }

// SBOMFile is the SBOM's file name for platform p.
func SBOMFile(p v1.Platform) string { return "warmer-" + p.OS + "-" + p.Architecture + ".cdx.json" }

func (o Options) check() (Options, error) {
	if !versionRE.MatchString(o.Version) {
		return o, fmt.Errorf("version %q: want vX.Y.Z or vX.Y.Z-pre (e.g. v0.1.0)", o.Version)
	}
	if o.Registry == "" {
		return o, errors.New("no registry: want one such as ghcr.io/warmer-dev")
	}
	if _, err := name.NewRepository(o.Repository(), name.StrictValidation); err != nil {
		return o, fmt.Errorf("registry %q: %w", o.Registry, err)
	}
	if o.Dist == "" {
		return o, errors.New("no dist folder")
	}
	if o.Platforms == nil {
		o.Platforms = image.DefaultPlatforms
	}
	if o.PluginPlatforms == nil {
		o.PluginPlatforms = PluginPlatforms
	}
	if o.Kubectl == "" {
		o.Kubectl = "kubectl"
	}
	o.Created = o.Created.UTC().Truncate(time.Second)
	return o, nil
}

// Build writes the release into opts.Dist and returns the image index's
// digest.
func Build(ctx context.Context, opts Options) (v1.Hash, error) {
	opts, err := opts.check()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := emptyDir(opts.Dist); err != nil {
		return v1.Hash{}, err
	}
	digest, err := buildImage(ctx, opts)
	if err != nil {
		return v1.Hash{}, err
	}
	ref := opts.Repository() + "@" + digest.String()
	if err := renderInstall(ctx, opts, ref); err != nil {
		return v1.Hash{}, err
	}
	if err := packageChart(opts, digest); err != nil {
		return v1.Hash{}, err
	}
	if err := buildPlugin(ctx, opts); err != nil {
		return v1.Hash{}, err
	}
	return digest, writeSums(opts.Dist)
}

// buildImage compiles the binary for every platform, describes each in an
// SBOM, and writes the image index as an OCI layout tarball.
func buildImage(ctx context.Context, opts Options) (v1.Hash, error) {
	tmp, err := os.MkdirTemp("", "warmer-release-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	iopts := image.Options{Dir: opts.Dir, Version: opts.Version, Platforms: opts.Platforms, Created: opts.Created}
	binaries := map[string]string{}
	for _, p := range opts.Platforms {
		bin, err := image.Compile(ctx, iopts, p, tmp)
		if err != nil {
			return v1.Hash{}, err
		}
		if err := writeSBOM(ctx, opts, bin, filepath.Join(opts.Dist, SBOMFile(p))); err != nil {
			return v1.Hash{}, err
		}
		binaries[p.String()] = bin
	}
	idx, err := image.Assemble(binaries, iopts)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := image.WriteOCI(filepath.Join(opts.Dist, ImageFile), idx, opts.Repository()+":"+opts.Version); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// emptyDir makes dir, or checks that it holds nothing: a release never
// mixes with files of another.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty (%s, ...): remove it first", dir, entries[0].Name())
	}
	return nil
}
