package release

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Publish pushes what Build wrote in opts.Dist: the image index to
// Repository:Version and the chart to oci://Registry/charts/warmer at
// ChartVersion, with helm (the helm command, path or name). It first checks
// SHA256SUMS and that install.yaml names the index it pushes. Credentials
// come from the Docker config for the image and from helm's registry login
// for the chart; loopback and private addresses are spoken to over plain
// HTTP, as go-containerregistry does.
func Publish(ctx context.Context, opts Options, helm string) (v1.Hash, error) {
	opts, err := opts.check()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := checkSums(opts.Dist); err != nil {
		return v1.Hash{}, err
	}
	tmp, err := os.MkdirTemp("", "warmer-publish-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	idx, err := readIndex(filepath.Join(opts.Dist, ImageFile), tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	install, err := os.ReadFile(filepath.Join(opts.Dist, InstallFile))
	if err != nil {
		return v1.Hash{}, err
	}
	if ref := opts.Repository() + "@" + digest.String(); !bytes.Contains(install, []byte("image: "+ref+"\n")) {
		return v1.Hash{}, fmt.Errorf("%s does not run %s: made for another registry? (make release REGISTRY=%s)", InstallFile, ref, opts.Registry)
	}
	tag, err := name.NewTag(opts.Repository()+":"+opts.Version, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return digest, pushChart(ctx, opts, helm, tag.Scheme() == "http")
}

// pushChart pushes the packaged chart to oci://Registry/charts.
func pushChart(ctx context.Context, opts Options, helm string, plainHTTP bool) error {
	args := []string{"push", filepath.Join(opts.Dist, opts.ChartFile()), "oci://" + strings.TrimSuffix(opts.Registry, "/") + "/charts"}
	if plainHTTP {
		args = append(args, "--plain-http")
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// readIndex unpacks the OCI layout tarball into dir and returns the one
// image index its index.json points at.
func readIndex(tarball, dir string) (v1.ImageIndex, error) {
	if err := untar(tarball, dir); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", tarball, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d entries, want the one image index", tarball, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// untar writes the regular files and folders of a tar into dir, refusing
// any name that leaves it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("entry %q leaves the layout", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFrom(target, tr)
		default:
			err = fmt.Errorf("entry %q: type %c is no part of an OCI layout", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeFrom(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
