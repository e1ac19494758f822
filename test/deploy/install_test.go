package deploy

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// install applies config/default, as `make deploy` does, and waits until
// the NodeWarm policy is enforced.
func install(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	mustKubectl(t, cp, "apply", "-k", configDir(t, "default"))
	waitForPolicy(t, cp)
}

// waitForPolicy waits until the API server enforces the NodeWarm policy.
// A policy takes effect shortly after it is created, not with the create:
// checks made before would pass for the wrong reason. (Its type-checking
// status is written by kube-controller-manager, which the test bed does
// not run; the checks exercise every expression instead.)
func waitForPolicy(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	probe := clientAs(t, cp, agentImpersonation(ownNode))
	nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// A dry run goes through admission but stores nothing.
		err := probe.Create(context.Background(), nw.DeepCopy(), client.DryRunAll)
		if got, _ := verdict(err); got == deniedByPolicy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("policy %s not in force within 30s: a NodeWarm of another node gets %v", policyName, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
