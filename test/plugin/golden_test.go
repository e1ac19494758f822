package plugin

import (
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestGolden runs each verb, as text and as JSON or YAML, as a user with
// only warmer-viewer, over objects on a real API server, and compares
// what it prints with testdata/.
func TestGolden(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	grantViewer(t, cp, viewer)
	createFixture(t, cp)
	for _, c := range []struct {
		file string
		args []string
	}{
		{"status.txt", []string{"status", "web", "-n", shop}},
		{"status.json", []string{"status", "web", "-n", shop, "-o", "json"}},
		{"status-ready.txt", []string{"status", "ready", "-n", shop}},
		{"why.txt", []string{"why", "web", "-n", shop}},
		{"why.yaml", []string{"why", "web", "-n", shop, "-o", "yaml"}},
		{"why-ready.txt", []string{"why", "ready", "-n", shop}},
		{"node.txt", []string{"node", "node-a"}},
		{"node-pulling.txt", []string{"node", "node-b"}},
		{"node.json", []string{"node", "node-b", "-o", "json"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, err := run(t, cp, viewer, c.args...)
			if err != nil {
				t.Fatalf("kubectl warmer %s: %v", strings.Join(c.args, " "), err)
			}
			if strings.ContainsRune(out, '\x1b') {
				t.Errorf("escape sequences in output that is not a terminal's:\n%q", out)
			}
			golden(t, c.file, out)
		})
	}
	// status --watch of a Ready ImageWarm ends at once, with exit 0.
	if out, err := run(t, cp, viewer, "status", "ready", "-n", shop, "--watch", "--timeout=30s"); err != nil || !strings.Contains(out, "Ready") {
		t.Errorf("status --watch of a Ready ImageWarm: %v\n%s", err, out)
	}
	// ... and of one that is not, fails at the timeout, like kubectl wait.
	if out, err := run(t, cp, viewer, "status", "web", "-n", shop, "--watch", "--timeout=2s"); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("status --watch past its timeout: error %v, want timed out\n%s", err, out)
	}
}

// TestErrors checks the errors a person meets: a name that is not there,
// a node without a report, an unknown format, and a user without
// warmer-viewer.
func TestErrors(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	grantViewer(t, cp, viewer)
	createFixture(t, cp)
	for _, c := range []struct {
		user string
		args []string
		want string
	}{
		{viewer, []string{"status", "nope", "-n", shop}, "ImageWarm shop/nope not found"},
		{viewer, []string{"why", "web", "-n", "elsewhere"}, "ImageWarm elsewhere/web not found"},
		{viewer, []string{"node", "node-z"}, "node node-z has no NodeWarm"},
		{viewer, []string{"status", "web", "-n", shop, "-o", "wide"}, `unknown output format "wide"`},
		{viewer, []string{"status"}, "accepts 1 arg"},
		{"mallory", []string{"status", "web", "-n", shop}, "forbidden"},
		{"mallory", []string{"node", "node-a"}, "forbidden"},
	} {
		out, err := run(t, cp, c.user, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %s: error %v, want one saying %q\n%s", strings.Join(c.args, " "), c.user, err, c.want, out)
		}
	}
}
