// Package plugin tests kubectl warmer (cmd/kubectl-warmer,
// internal/warmerctl) as people use it, on a real kube-apiserver: every
// verb as a user who holds only the shipped warmer-viewer ClusterRole
// (impersonated with --as), its text compared with golden files
// (testdata/, rewritten by -update), why for each failure class a real
// agent reports, a thousand nodes in one screen, and the live view in a
// real terminal (tmux) during a slowed warm.
package plugin

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/warmer-dev/warmer/internal/warmerctl"
	"github.com/warmer-dev/warmer/test/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with what the commands print")

// viewer is the user the commands run as: warmer-viewer and nothing else.
const viewer = "alice"

// grantViewer creates config/rbac's warmer-viewer ClusterRole as shipped
// and binds it to user.
func grantViewer(t testing.TB, cp *testbed.ControlPlane, user string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "rbac", "viewer_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-warmer-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	ctx := context.Background()
	// A fleet applies all of config/rbac itself (InstallIdentity).
	if err := cp.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}

// run runs kubectl warmer in this process as user (impersonated by the
// admin kubeconfig, as kubectl --as does), its output not a terminal.
func run(t testing.TB, cp *testbed.ControlPlane, user string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runTo(cp, user, &out, args...)
	return out.String(), err
}

// runTo is run writing its output to out.
func runTo(cp *testbed.ControlPlane, user string, out io.Writer, args ...string) error {
	var errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &errOut}
	cmd := warmerctl.NewCommand(streams, func(string) string { return "" }, "test")
	cmd.SetArgs(append(args, "--kubeconfig", cp.Kubeconfig, "--as", user))
	return cmd.ExecuteContext(context.Background())
}

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from what was printed (run with -update if the change is meant):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
