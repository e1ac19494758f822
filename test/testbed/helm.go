package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Helm returns the path of the helm CLI that hack/install-helm.sh built
// into the cache, at the version that script pins. It never builds helm (a
// cold build takes minutes) and never falls back to another helm on PATH,
// whose version could differ: a missing binary fails the test and says how
// to get it.
func Helm(t TB) string {
	t.Helper()
	helmOnce.Do(func() { helmPath, helmErr = findHelm(RepoRoot(t)) })
	if helmErr != nil {
		t.Fatalf("helm is needed for this test and is not built: run `make testbed` (hack/install-helm.sh builds it into the cache): %v", helmErr)
	}
	return helmPath
}

// The helm binary, looked up once per test binary.
var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// findHelm asks hack/install-helm.sh, without letting it build, for the
// folder of the cached helm.
func findHelm(repo string) (string, error) {
	out, err := exec.Command(filepath.Join(repo, "hack", "install-helm.sh"), "--check").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = errors.New(strings.TrimSpace(string(exit.Stderr)))
		}
		return "", err
	}
	return filepath.Join(strings.TrimSpace(string(out)), "helm"), nil
}

// RunHelm runs the cached helm CLI (see Helm) with args and returns what it
// printed on stdout; an error carries both outputs. Helm's own configuration, cache and data go to a
// folder removed at cleanup, so nothing is left in the home directory.
func RunHelm(t TB, args ...string) (string, error) {
	t.Helper()
	home, err := os.MkdirTemp("", "wb-helm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	cmd := exec.Command(Helm(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Helm runs the cached helm CLI (see RunHelm) against the control plane as
// the admin.
func (cp *ControlPlane) Helm(t TB, args ...string) (string, error) {
	t.Helper()
	return RunHelm(t, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
}
