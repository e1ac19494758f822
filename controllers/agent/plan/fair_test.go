package plan

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// TestPlanFairWarms: a namespace that sorts first with more ImageWarms
// than a NodeWarm lists does not push a later namespace's out of
// status.warms: the ImageWarms listed are taken in turn by namespace,
// the images point at the right ones, and a condition says the list is
// cut; back under the bound, it goes.
func TestPlanFairWarms(t *testing.T) {
	var warms []warmv1.ImageWarm
	for i := range 600 {
		warms = append(warms, warm("aaa", fmt.Sprintf("w%03d", i), nil, fmt.Sprintf("registry.test/aaa/i%03d:v1", i)))
	}
	warms = append(warms, warm("mmm", "one", nil, "registry.test/aaa/i000:v1"), warm("zzz", "one", nil, "registry.test/zzz/one:v1"))
	in := input(warms...)
	out := decide(in)
	st := out.Status
	if len(st.Warms) != warmv1.MaxNodeWarms {
		t.Fatalf("%d warms listed, want %d", len(st.Warms), warmv1.MaxNodeWarms)
	}
	for _, ns := range []string{"mmm", "zzz"} {
		if !slices.ContainsFunc(st.Warms, func(w warmv1.WarmRef) bool { return w.Namespace == ns && w.Name == "one" }) {
			t.Errorf("%s/one was pushed out of status.warms by aaa's 600", ns)
		}
	}
	if st.Warms[509].Name != "w509" || st.Warms[510].Namespace != "mmm" {
		t.Errorf("warms %v ... %v: want aaa's first 510 by name, then mmm's and zzz's", st.Warms[:2], st.Warms[508:])
	}
	if !slices.IsSortedFunc(st.Warms, func(a, b warmv1.WarmRef) int {
		return nnCompare(types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
	}) {
		t.Error("status.warms is not sorted by namespace and name")
	}
	checkWarmIndices(t, st)
	c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionWarmsListed)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != warmv1.ReasonTooManyImageWarms {
		t.Fatalf("condition %+v, want WarmsListed False %s", c, warmv1.ReasonTooManyImageWarms)
	}

	again := decide(in).Status.Warms
	if !slices.Equal(again, st.Warms) {
		t.Error("a second pass over the same ImageWarms lists others")
	}

	in = input(warms[598:]...)
	in.Conditions = st.Conditions
	st = decide(in).Status
	if len(st.Warms) != 4 || meta.FindStatusCondition(st.Conditions, warmv1.ConditionWarmsListed) != nil {
		t.Errorf("%d warms with conditions %+v; want 4 and no WarmsListed", len(st.Warms), st.Conditions)
	}
}

// TestPlanPullShares checks whose turn each pull takes in the engine's
// queue: its namespace's, a secrets namespace's for its own entry, and
// for an image several namespaces want, the one that asks for the fewest
// pulls (then the first by name).
func TestPlanPullShares(t *testing.T) {
	private := warm("sec", "private", nil, "registry.test/sec/app:v1")
	private.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	in := input(
		warm("aaa", "many", nil, "registry.test/a/1:v1", "registry.test/a/2:v1", "registry.test/a/3:v1", "registry.test/shared:v1"),
		warm("zzz", "one", nil, "registry.test/shared:v1"),
		warm("mmm", "two", nil, "registry.test/m/1:v1", "registry.test/tie:v1"),
		warm("nnn", "two", nil, "registry.test/n/1:v1", "registry.test/tie:v1"),
		private,
	)
	want := map[string]string{
		"registry.test/a/1:v1": "aaa", "registry.test/a/2:v1": "aaa", "registry.test/a/3:v1": "aaa",
		"registry.test/shared:v1": "zzz",
		"registry.test/m/1:v1":    "mmm", "registry.test/n/1:v1": "nnn", "registry.test/tie:v1": "mmm",
		"registry.test/sec/app:v1": "sec",
	}
	pulls := decide(in).Pulls
	if len(pulls) != len(want) {
		t.Fatalf("%d pulls, want %d", len(pulls), len(want))
	}
	for _, pl := range pulls {
		if pl.Share != want[pl.Image] {
			t.Errorf("%s takes %q's turn, want %q's", pl.Image, pl.Share, want[pl.Image])
		}
	}
}

// checkWarmIndices checks that TestPlanFairWarms's images point at the
// ImageWarms listed that want them.
func checkWarmIndices(t *testing.T, st warmv1.NodeWarmStatus) {
	t.Helper()
	for _, img := range st.Images {
		if img.Image == "registry.test/zzz/one:v1" && (len(img.Warms) != 1 || st.Warms[img.Warms[0]].Namespace != "zzz") {
			t.Errorf("zzz's image points at %v, want zzz/one", img.Warms)
		}
		if img.Image == "registry.test/aaa/i000:v1" && len(img.Warms) != 2 {
			t.Errorf("aaa/i000 points at %v, want aaa/w000 and mmm/one", img.Warms)
		}
	}
}
