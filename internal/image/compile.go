package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// GoBuildArgs are the arguments after "go" that build the binary, with
// version stamped into main.version: static (with CGO_ENABLED=0 in the
// environment), no local paths, no symbol tables, as the Dockerfile's
// builder stage builds it. -buildvcs=false keeps the checkout's state (a
// dirty tree, a commit) out of the binary, so only the source counts.
func GoBuildArgs(version, out string) []string {
	return GoBuildPackageArgs("./cmd/warmer", version, out)
}

// GoBuildPackageArgs are GoBuildArgs for another command of the module,
// pkg (kubectl-warmer, which the release ships beside the image).
func GoBuildPackageArgs(pkg, version, out string) []string {
	return []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version=" + version,
		"-o", out, pkg}
}

// GoEnv is the environment of a cross-compile for p: the caller's, less
// what would make the binary depend on the build machine rather than on
// the source.
func GoEnv(p v1.Platform) []string {
	env := make([]string, 0, len(os.Environ())+6)
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "GOFLAGS", "CGO_ENABLED", "GOOS", "GOARCH", "GOARM", "GOAMD64", "GOARM64":
		default:
			env = append(env, kv)
		}
	}
	// The baseline instruction sets, so the binary runs on every node of
	// its architecture.
	return append(env, "CGO_ENABLED=0", "GOFLAGS=", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOAMD64=v1", "GOARM64=v8.0")
}

// Compile builds the binary for p into dir, as Build does, and returns its
// path: for a caller that needs the binaries themselves (make release
// describes each in an SBOM) before Assemble makes the index.
func Compile(ctx context.Context, opts Options, p v1.Platform, dir string) (string, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	return compile(ctx, opts, p, dir)
}

// compile builds the binary for p into dir and returns its path.
func compile(ctx context.Context, opts Options, p v1.Platform, dir string) (string, error) {
	out := filepath.Join(dir, "warmer-"+p.OS+"-"+p.Architecture)
	cmd := exec.CommandContext(ctx, opts.Go, GoBuildArgs(opts.Version, out)...)
	cmd.Dir = opts.Dir
	cmd.Env = GoEnv(p)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build for %s: %w\n%s", p, err, b)
	}
	return out, nil
}
