package testbed

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// TestAgentIdentity checks the identity the bed runs agents with: the
// agent's service account, with its Node's name in the user's extra,
// where warmer's admission policies look for it, from a kubeconfig (an
// agent process) and from AgentConfig (an agent in the test's process).
func TestAgentIdentity(t *testing.T) {
	cp := StartControlPlane(t)
	cp.CreateNode(t, "id-node", nil)
	cp.CreateNode(t, "id-node-2", nil)
	for node, u := range map[string]authenticationv1.UserInfo{
		"id-node":   WhoAmI(t, cp.AgentKubeconfig(t, "id-node")),
		"id-node-2": WhoAmIWith(t, cp.AgentConfig(t, "id-node-2")),
	} {
		if u.Username != serviceAccountUser(AgentServiceAccount) {
			t.Errorf("agent of %s authenticates as %s", node, u.Username)
		}
		if got := u.Extra[NodeNameExtra]; !slices.Equal(got, []string{node}) {
			t.Errorf("agent's %s = %v, want [%s]; extra: %v", NodeNameExtra, got, node, u.Extra)
		}
	}
	c := WhoAmI(t, cp.ControllerKubeconfig(t))
	if c.Username != serviceAccountUser(ControllerServiceAccount) {
		t.Errorf("controller authenticates as %s", c.Username)
	}
}

// TestRolesWithoutPolicies checks the plane test/perf compares the
// policies against: the shipped roles, and no admission policy, so one
// node's agent may create another node's NodeWarm, which the policies
// refuse (TestAgentIdentity's plane, waitForPolicies).
func TestRolesWithoutPolicies(t *testing.T) {
	cp := StartControlPlane(t)
	cp.CreateNode(t, "roles-a", nil)
	cp.InstallRolesWithoutPolicies(t)
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	if err := cp.Client.List(context.Background(), &vaps); err != nil {
		t.Fatal(err)
	}
	if len(vaps.Items) != 0 {
		t.Fatalf("%d admission policies installed, want none", len(vaps.Items))
	}
	agent, err := client.New(cp.AgentConfig(t, "roles-a"), client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "roles-b"}}
	if err := agent.Create(context.Background(), nw, client.DryRunAll); err != nil {
		t.Errorf("agent of roles-a creating NodeWarm roles-b without the policies: %v", err)
	}
	// The roles grant no delete: the API server says Forbidden before it
	// looks for the object.
	if err := agent.Delete(context.Background(), nw, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("agent deleting a NodeWarm: %v, want Forbidden by the shipped roles", err)
	}
}
