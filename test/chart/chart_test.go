// Package chart tests warmer's Helm chart (charts/warmer): that with its
// default values it renders the same objects as config/default, so the two
// install paths cannot drift apart; that its values change what they
// promise; that helm lint passes; and that a real kube-apiserver accepts
// the install. helm is the CLI hack/install-helm.sh builds (make testbed).
package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warmer-dev/warmer/test/testbed"
)

const (
	// release and namespace are what the chart is rendered as: the
	// namespace config/default installs into, so the two must agree.
	release   = "warmer"
	namespace = "warmer-system"
)

// chartDir is the chart's folder in the repository.
func chartDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(testbed.RepoRoot(t), "charts", "warmer")
}

// helmTemplate renders the chart as release in ns with extra helm flags
// (--set ...). No API server is needed.
func helmTemplate(t *testing.T, ns string, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := templateOutput(t, ns, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return testbed.DecodeObjects(t, "helm template", out)
}

// templateOutput is helm template's output, or its error.
func templateOutput(t *testing.T, ns string, flags ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", ns}, flags...)
	return testbed.RunHelm(t, args...)
}

// kustomizeWith renders an overlay of config/base with config/components
// as an operator's overlay would use them.
func kustomizeWith(t *testing.T, base string, components ...string) []*unstructured.Unstructured {
	t.Helper()
	root := filepath.Join(testbed.RepoRoot(t), "config")
	dir := t.TempDir()
	// kustomize takes bases and components by relative path only.
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "resources: [" + rel(base) + "]\ncomponents:\n"
	for _, c := range components {
		k += "  - " + rel(c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s with %v: %v\n%s", base, components, err, b)
	}
	return testbed.DecodeObjects(t, "kubectl kustomize", string(b))
}

// kustomize renders a folder under config/ as kubectl kustomize does.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return testbed.Kustomize(t, filepath.Join(testbed.RepoRoot(t), "config", dir))
}

// id names an object by kind, namespace and name.
func id(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// find returns the object of objs with the given kind and name, failing
// the test when there is none.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s/%s rendered", kind, name)
	return nil
}
