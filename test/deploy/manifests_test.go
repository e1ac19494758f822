package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warmer-dev/warmer/test/testbed"
)

// render returns the objects `kubectl kustomize` makes of a config folder.
// It needs no API server.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return renderDir(t, configDir(t, dir))
}

// runtimeComponents are config/components/runtime-*, each with the socket
// it points the agent at.
var runtimeComponents = map[string]string{
	"runtime-crio":        "/var/run/crio/crio.sock",
	"runtime-k3s":         "/run/k3s/containerd/containerd.sock",
	"runtime-cri-dockerd": "/run/cri-dockerd.sock",
}

// overlay writes an overlay of config/default that uses component, as an
// operator's would, and returns its folder.
func overlay(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes bases and components by relative path only.
	rel := func(name string) string {
		r, err := filepath.Rel(dir, configDir(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rels := make([]string, len(components))
	for i, c := range components {
		rels[i] = rel(filepath.Join("components", c))
	}
	k := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", rel("default"), strings.Join(rels, ", "))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// renderDir returns the objects `kubectl kustomize dir` makes.
func renderDir(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return testbed.Kustomize(t, dir)
}

// ids names objects as Kind/name, sorted by the caller's order.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}
