package build

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func TestImageWarm(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "web"}
	for _, c := range []struct {
		name string
		got  *warmv1.ImageWarm
		want warmv1.ImageWarmSpec
	}{
		{"no options: no images, every node", ImageWarm("ns", "web"), warmv1.ImageWarmSpec{}},
		{"images in order, over several options",
			ImageWarm("ns", "web", Images("a:v1", "b:v1"), Images("c:v1")),
			warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"a:v1", "b:v1", "c:v1"}}},
		{"labels add up",
			ImageWarm("ns", "web", Images("a:v1"), MatchLabel("pool", "web"), MatchLabel("zone", "a")),
			warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"a:v1"},
				NodeSelector: &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"pool": "web", "zone": "a"}}}},
		{"a nil selector selects every node",
			ImageWarm("ns", "web", Selector(nil)), warmv1.ImageWarmSpec{}},
		{"a selector's labels",
			ImageWarm("ns", "web", Selector(map[string]warmv1.LabelValue{"pool": "web"})),
			warmv1.ImageWarmSpec{NodeSelector: &warmv1.NodeSelector{MatchLabels: map[string]warmv1.LabelValue{"pool": "web"}}}},
		{"any func is an option",
			ImageWarm("ns", "web", func(iw *warmv1.ImageWarm) { iw.Spec.StartupTaint = true }),
			warmv1.ImageWarmSpec{StartupTaint: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got.ObjectMeta, meta) {
				t.Errorf("meta = %+v, want %+v", c.got.ObjectMeta, meta)
			}
			if !reflect.DeepEqual(c.got.Spec, c.want) {
				t.Errorf("spec = %+v, want %+v", c.got.Spec, c.want)
			}
		})
	}
}

// Selector copies its map: changing the caller's map later changes no
// ImageWarm built from it.
func TestSelectorCopies(t *testing.T) {
	labels := map[string]warmv1.LabelValue{"pool": "web"}
	iw := ImageWarm("ns", "web", Selector(labels), MatchLabel("zone", "a"))
	labels["pool"] = "batch"
	if got := iw.Spec.NodeSelector.MatchLabels; len(got) != 2 || got["pool"] != "web" || len(labels) != 1 {
		t.Errorf("labels %v, caller's %v", got, labels)
	}
}

func TestDockerConfigSecret(t *testing.T) {
	s := DockerConfigSecret("ns", "regcred", "127.0.0.1:5000", "user", "pass")
	want := `{"auths":{"127.0.0.1:5000":{"username":"user","password":"pass"}}}`
	if s.Namespace != "ns" || s.Name != "regcred" || s.Type != "kubernetes.io/dockerconfigjson" ||
		string(s.Data[".dockerconfigjson"]) != want {
		t.Errorf("secret %+v", s)
	}
}

func TestRealisticRefs(t *testing.T) {
	refs := RealisticRefs(100)
	seen := map[string]bool{}
	total := 0
	for _, r := range refs {
		if seen[r] {
			t.Errorf("%s twice", r)
		}
		seen[r] = true
		total += len(r)
	}
	if avg := total / len(refs); avg < 40 || avg > 55 {
		t.Errorf("average length %d, want about 47", avg)
	}
}
