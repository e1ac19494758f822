package deploy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// movedNamespace is where TestPoliciesInAnotherNamespace installs warmer.
const movedNamespace = "platform-warmer"

// TestPoliciesInAnotherNamespace installs config/default through an
// overlay that moves warmer to another namespace, as an operator's
// kustomization would, and makes, as that install's agent on node-a, the
// writes the agent policies refuse: they must still refuse them (they once
// matched only warmer-system's agent, so a moved install kept the agents'
// RBAC with no check at all).
func TestPoliciesInAnotherNamespace(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	dir := t.TempDir()
	base, err := filepath.Rel(dir, configDir(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + movedNamespace +
		"\nresources:\n  - " + base + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, cp, "apply", "-k", dir)
	for _, n := range []string{ownNode, otherNode} {
		cp.CreateNode(t, n, nil)
		setTaints(t, cp.Client, n, corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoSchedule})
	}
	agent := clientAs(t, cp, rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + movedNamespace + ":warmer-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + movedNamespace, "system:authenticated"},
		Extra:    map[string][]string{nodeNameKey: {ownNode}},
	})
	waitForTaintPolicy(t, agent)
	runChecks(t, agent, []check{
		{name: "write another node's NodeWarm", want: deniedByPolicy, do: createNodeWarm(otherNode)},
		{name: "remove the startup taint from another Node", want: deniedByPolicy, do: untaint(otherNode, nil),
			msg: "the agent on node node-a may change only Node node-a, not node-b"},
		{name: "remove the startup taint from its Node", want: allowed, do: untaint(ownNode, nil)},
	})
	checkMovedReferences(t, cp)
}

// checkMovedReferences checks what names warmer's namespace outside
// metadata, which kustomize's namespace transformer alone would leave:
// the ImageWarm policies' parameters are found in the moved namespace (an
// ImageWarm is admitted, not refused for want of them), and the agents'
// FlowSchema matches the moved agent.
func checkMovedReferences(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-moved"}}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, time.Minute, "an ImageWarm admitted with the moved install's parameters", func() error {
		return cp.Client.Create(ctx, build.ImageWarm("team-moved", "probe", build.Images("nginx:1.27")), client.DryRunAll)
	})
	var fs flowcontrolv1.FlowSchema
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "warmer-agents"}, &fs); err != nil {
		t.Fatal(err)
	}
	for _, r := range fs.Spec.Rules {
		for _, s := range r.Subjects {
			if s.ServiceAccount == nil || s.ServiceAccount.Namespace != movedNamespace {
				t.Errorf("FlowSchema warmer-agents subject %+v: want the ServiceAccount of %s", s, movedNamespace)
			}
		}
	}
}
