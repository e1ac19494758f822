// Command image builds warmer's release image without a container engine
// (`make image`): the binary for linux/amd64 and linux/arm64, one image
// each, an OCI image index over both, written as an OCI layout tarball
// that `ctr images import`, skopeo and crane read; with --push, also to
// the image's registry (`make push`). See internal/image and
// docs/operations.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warmer-dev/warmer/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/warmer-image.tar", "The OCI layout tarball to write.")
	ref := flag.String("image", "", "The image's full name, with its tag, recorded in the tarball (e.g. ghcr.io/warmer-dev/warmer:v0.1.0).")
	version := flag.String("version", "", "The version stamped into the binary; empty: the image's tag.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated platforms to build.")
	push := flag.Bool("push", false, "Also push the image index to --image's registry, with the credentials of the Docker config (~/.docker/config.json, $DOCKER_CONFIG); plain HTTP for localhost and loopback addresses.")
	flag.Parse()

	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("--image %q: want a full name with a tag: %w", *ref, err)
	}
	opts := image.Options{Version: *version}
	if opts.Version == "" {
		opts.Version = tag.TagStr()
	}
	if opts.Created, err = image.SourceDate(); err != nil {
		return err
	}
	if opts.Platforms, err = image.ParsePlatforms(*platforms); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	idx, err := image.Build(ctx, opts)
	if err != nil {
		return err
	}
	if err := image.WriteOCI(*out, idx, tag.Name()); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s\n  %s@%s\n  platforms %s, created %s\n", *out, tag.Name(), digest, *platforms, opts.Created.Format(time.RFC3339))
	if !*push {
		return nil
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", tag.Name(), err)
	}
	fmt.Printf("pushed %s@%s\n", tag.Name(), digest)
	return nil
}
