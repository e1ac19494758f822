package deploy

import (
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// render returns the objects `kubectl kustomize` makes of a config folder.
// It needs no API server.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	b, err := exec.Command("kubectl", "kustomize", configDir(t, dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, b)
	}
	out := string(b)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding kubectl kustomize %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ids names objects as Kind/name, sorted by the caller's order.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}
