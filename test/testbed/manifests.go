package testbed

import (
	"errors"
	"io"
	"os/exec"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Kustomize returns the objects `kubectl kustomize dir` renders.
func Kustomize(t TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	b, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return DecodeObjects(t, "kubectl kustomize "+dir, string(b))
}

// DecodeObjects splits a YAML (or JSON) stream into objects, skipping
// empty documents; what names the stream in a failure.
func DecodeObjects(t TB, what, stream string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding %s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
