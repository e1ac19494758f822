// Package deploy tests warmer's deployment manifests (config/) on a real
// kube-apiserver: that they apply, and that the RBAC roles and the
// admission policy allow what each role needs and refuse the rest, checked
// with real requests made as the roles' service accounts.
package deploy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// systemNamespace is where config/ installs warmer.
const systemNamespace = "warmer-system"

// kubectl runs the system's kubectl against the test control plane and
// returns its combined output.
func kubectl(t *testing.T, cp *testbed.ControlPlane, args ...string) (string, error) {
	t.Helper()
	return cp.Kubectl(t, args...)
}

// mustKubectl is kubectl that fails the test on an error.
func mustKubectl(t *testing.T, cp *testbed.ControlPlane, args ...string) string {
	t.Helper()
	out, err := kubectl(t, cp, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// configDir is a folder under the repository's config/.
func configDir(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(testbed.RepoRoot(t), "config", name)
}
