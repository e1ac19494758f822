// Command release makes and publishes warmer's release artifacts:
//
//	release build   --version v0.1.0 --registry ghcr.io/warmer-dev --dist dist   (make release)
//	release publish --version v0.1.0 --registry ghcr.io/warmer-dev --dist dist   (make publish)
//
// See internal/release for what dist holds and docs/releasing.md for the
// procedure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/warmer-dev/warmer/internal/image"
	"github.com/warmer-dev/warmer/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "build" && args[0] != "publish") {
		return errors.New("usage: release build|publish --version vX.Y.Z --registry REGISTRY --dist DIR")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var opts release.Options
	fs.StringVar(&opts.Version, "version", "", "The release's version, vX.Y.Z or vX.Y.Z-pre.")
	fs.StringVar(&opts.Registry, "registry", "ghcr.io/warmer-dev", "Where the image (REGISTRY/warmer) and the chart (oci://REGISTRY/charts/warmer) go.")
	fs.StringVar(&opts.Dist, "dist", "dist", "The folder of the release's files.")
	fs.StringVar(&opts.Kubectl, "kubectl", "kubectl", "The kubectl that renders config/default.")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "Comma-separated platforms of the image.")
	pluginPlatforms := fs.String("plugin-platforms", "", "Comma-separated platforms of kubectl-warmer; empty: linux, darwin (amd64, arm64) and windows (amd64).")
	helm := fs.String("helm", "helm", "The helm that pushes the chart (publish).")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var err error
	if opts.Dir, err = os.Getwd(); err != nil {
		return err
	}
	if opts.Created, err = image.SourceDate(); err != nil {
		return err
	}
	if opts.Platforms, err = image.ParsePlatforms(*platforms); err != nil {
		return err
	}
	if *pluginPlatforms != "" {
		if opts.PluginPlatforms, err = image.ParsePlatforms(*pluginPlatforms); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if args[0] == "publish" {
		digest, err := release.Publish(ctx, opts, *helm)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s:%s (%s@%s)\npushed oci://%s/charts/warmer:%s\n", opts.Repository(), opts.Version,
			opts.Repository(), digest, strings.TrimSuffix(opts.Registry, "/"), opts.ChartVersion())
		return nil
	}
	digest, err := release.Build(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("%s: warmer %s, image %s@%s (%s)\n", opts.Dist, opts.Version, opts.Repository(), digest, *platforms)
	return nil
}
