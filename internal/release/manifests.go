package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// renderInstall writes install.yaml: config/default with the image ref
// (Repository@digest), through the overlay `make deploy IMG=...` writes
// (hack/deploy-overlay.sh), rendered by kubectl kustomize as every
// install path of the repo renders it.
func renderInstall(ctx context.Context, opts Options, ref string) error {
	tmp, err := os.MkdirTemp("", "warmer-release-overlay-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	overlay := filepath.Join(tmp, "overlay")
	cmd := exec.CommandContext(ctx, filepath.Join(opts.Dir, "hack", "deploy-overlay.sh"), ref, overlay)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/deploy-overlay.sh: %w\n%s", err, b)
	}
	var out, stderr bytes.Buffer
	cmd = exec.CommandContext(ctx, opts.Kubectl, "kustomize", overlay)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl kustomize of config/default: %w\n%s", err, stderr.Bytes())
	}
	if !bytes.Contains(out.Bytes(), []byte("image: "+ref+"\n")) {
		return fmt.Errorf("config/default rendered without the image %s: does its images: entry still name %s?", ref, "ghcr.io/warmer-dev/warmer")
	}
	head := fmt.Sprintf("# warmer %s: every object it needs in a cluster (config/default), the\n"+
		"# image pinned by digest. kubectl apply -f install.yaml installs or upgrades;\n"+
		"# kubectl delete -f install.yaml removes it, its CRDs and every ImageWarm.\n", opts.Version)
	return os.WriteFile(filepath.Join(opts.Dist, InstallFile), append([]byte(head), out.Bytes()...), 0o644)
}
