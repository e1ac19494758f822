package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// writeSBOM describes the binary bin in a CycloneDX SBOM at out: its Go
// modules with their versions and hashes, read from the build information
// the go command stamps into every binary, so the SBOM says what this
// binary holds rather than what go.mod allows. cyclonedx-gomod is a tool
// of go.mod; no serial number or timestamp, so the file is reproducible.
func writeSBOM(ctx context.Context, opts Options, bin, out string) error {
	tool, err := goTool(ctx, opts.Dir, "cyclonedx-gomod")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, tool, "bin", "-json", "-noserial", "-notimestamp",
		"-version", opts.Version, "-output", out, bin)
	cmd.Dir = opts.Dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("SBOM of %s: %w\n%s", bin, err, b)
	}
	return nil
}

// goTool builds a tool of go.mod for this machine and returns its path
// (`go tool -n`), whatever GOOS and GOARCH the caller's environment sets
// for cross-compiling.
func goTool(ctx context.Context, dir, tool string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", tool)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOOS" && k != "GOARCH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n %s: %w", tool, err)
	}
	return strings.TrimSpace(string(b)), nil
}
