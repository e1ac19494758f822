package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNodeLabelKey(t *testing.T) {
	long := strings.Repeat("a", 60) + ".b"
	longer := strings.Repeat("a", 60) + ".c"
	ns63 := strings.Repeat("n", 63)
	for _, tc := range []struct {
		ns, name, want string
	}{
		{"team-a", "web", "team-a.warm.warmer.dev/web"},
		{"team-a", "web.v2", "team-a.warm.warmer.dev/web.v2"},
		{"t", strings.Repeat("x", 63), "t.warm.warmer.dev/" + strings.Repeat("x", 63)},
		{ns63, long, ""},
	} {
		got := NodeLabelKey(tc.ns, tc.name)
		if tc.want != "" && got != tc.want {
			t.Errorf("NodeLabelKey(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.want)
		}
		if errs := validation.IsQualifiedName(got); len(errs) > 0 {
			t.Errorf("NodeLabelKey(%q, %q) = %q, not a label key: %v", tc.ns, tc.name, got, errs)
		}
		if !IsNodeLabelKey(got) {
			t.Errorf("IsNodeLabelKey(%q) = false", got)
		}
	}
	if a, b := NodeLabelKey("t", long), NodeLabelKey("t", longer); a == b {
		t.Errorf("two long names share key %q", a)
	}
	if a, b := NodeLabelKey("a", "b"), NodeLabelKey("b", "b"); a == b {
		t.Errorf("two namespaces share key %q", a)
	}
	for _, key := range []string{"warm.warmer.dev/x", "a.b.warm.warmer.dev/x", "team.warm.warmer.dev", "warmer.dev/warming", "team.warm.warmer.devx/y", "kubernetes.io/hostname"} {
		if IsNodeLabelKey(key) {
			t.Errorf("IsNodeLabelKey(%q) = true, want false", key)
		}
	}
}
