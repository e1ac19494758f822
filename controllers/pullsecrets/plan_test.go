package pullsecrets

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestPlan: which pull secrets go to which node's bundle, by the agent's
// selector rule.
func TestPlan(t *testing.T) {
	named := func(ns, name string, opts ...build.ImageWarmOption) warmv1.ImageWarm {
		iw := build.ImageWarm(ns, name, append([]build.ImageWarmOption{build.Images("r.example/" + name + ":1")}, opts...)...)
		iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: name + "-cred"}, {Name: "shared"}}
		return *iw
	}
	suspended := named("team-a", "suspended")
	suspended.Spec.Suspend = true
	deleting := named("team-a", "deleting")
	deleting.DeletionTimestamp = &metav1.Time{}
	badSelector := named("team-a", "bad", build.MatchLabel("pool", "gpu"))
	badSelector.Spec.NodeSelector.MatchExpressions = []warmv1.NodeSelectorRequirement{{Key: "x", Operator: "Bogus"}}
	cp := named("team-c", "cp", build.MatchLabel("node-role.kubernetes.io/control-plane", ""))
	noSecrets := *build.ImageWarm("team-d", "public", build.Images("r.example/p:1"))
	warms := []warmv1.ImageWarm{
		named("team-a", "all"),
		named("team-b", "gpu", build.MatchLabel("pool", "gpu")),
		suspended, deleting, badSelector, cp, noSecrets,
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"a plain node: the no-selector ImageWarm", map[string]string{}, "[team-a/all-cred team-a/shared]"},
		{"a gpu node adds team-b's", map[string]string{"pool": "gpu"}, "[team-a/all-cred team-a/shared team-b/gpu-cred team-b/shared]"},
		{"a control-plane node: only the ImageWarm asking for it", map[string]string{"node-role.kubernetes.io/control-plane": ""}, "[team-c/cp-cred team-c/shared]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Plan(tc.labels, warms)); got != tc.want {
				t.Errorf("Plan = %s; want %s", got, tc.want)
			}
		})
	}
	if got := Plan(map[string]string{"pool": "cpu"}, []warmv1.ImageWarm{named("team-b", "gpu", build.MatchLabel("pool", "gpu"))}); len(got) != 0 {
		t.Errorf("a node no ImageWarm selects: %v; want nothing", got)
	}
}
