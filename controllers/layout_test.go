package controllers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/warmer-dev/warmer/"

// matches says whether the import path dep is pattern, or below it when
// pattern ends in "/..." (as go list's patterns do).
func matches(dep, pattern string) bool {
	if root, ok := strings.CutSuffix(pattern, "/..."); ok {
		return dep == root || strings.HasPrefix(dep, root+"/")
	}
	return dep == pattern
}

// TestImportRules holds the layout's rules (docs/design.md, Code layout):
// the planner decides without an API client, a clock or a container
// runtime; the ImageWarm controller and the pull-secret copier need
// neither the agent nor the pull engine; the pull engine and the CRI client hold no Kubernetes API types;
// kubectl warmer reads the API alone, and the node binary has none of it.
// The compiler would accept a break of any; this test does not.
func TestImportRules(t *testing.T) {
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"controllers/agent/plan", []string{
			"sigs.k8s.io/controller-runtime/...", "k8s.io/client-go/...", "k8s.io/utils/clock/...",
			"k8s.io/cri-api/...", "google.golang.org/grpc/...", module + "pkg/pullengine", module + "pkg/criclient",
		}},
		{"controllers/imagewarm", []string{module + "controllers/agent/...", module + "pkg/pullengine/...", module + "pkg/criclient"}},
		{"controllers/gate", []string{module + "controllers/agent/...", module + "controllers/imagewarm/...", module + "pkg/pullengine/...", module + "pkg/criclient"}},
		{"controllers/pullsecrets", []string{module + "controllers/agent/...", module + "controllers/imagewarm/...", module + "pkg/pullengine/...", module + "pkg/criclient"}},
		{"pkg/pullengine", []string{module + "api/...", module + "controllers/...", "sigs.k8s.io/controller-runtime/...",
			"k8s.io/api/...", "k8s.io/apimachinery/..."}},
		{"pkg/criclient", []string{module + "api/...", "sigs.k8s.io/controller-runtime/...", "k8s.io/api/...", "k8s.io/apimachinery/..."}},
		// kubectl warmer only reads the API; the node binary carries none
		// of the plugin's terminal and kubeconfig libraries.
		{"internal/warmerctl", []string{module + "controllers/...", module + "pkg/pullengine/...", module + "pkg/criclient/..."}},
		{"cmd/warmer", []string{module + "internal/warmerctl", "github.com/charmbracelet/...", "k8s.io/cli-runtime/..."}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", module+r.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", r.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range r.forbidden {
				if matches(dep, f) {
					t.Errorf("%s depends on %s, which it must not (%s)", r.pkg, dep, f)
				}
			}
		}
	}
}
