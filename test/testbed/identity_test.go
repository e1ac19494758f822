package testbed

import (
	"slices"
	"testing"
)

// TestAgentIdentity checks the identity the bed runs agents with: the
// agent's service account, with its Node's name in the user's extra,
// where warmer's admission policies look for it.
func TestAgentIdentity(t *testing.T) {
	cp := StartControlPlane(t)
	cp.CreateNode(t, "id-node", nil)
	u := WhoAmI(t, cp.AgentKubeconfig(t, "id-node"))
	if u.Username != serviceAccountUser(AgentServiceAccount) {
		t.Errorf("agent authenticates as %s", u.Username)
	}
	if got := u.Extra[NodeNameExtra]; !slices.Equal(got, []string{"id-node"}) {
		t.Errorf("agent's %s = %v, want [id-node]; extra: %v", NodeNameExtra, got, u.Extra)
	}
	c := WhoAmI(t, cp.ControllerKubeconfig(t))
	if c.Username != serviceAccountUser(ControllerServiceAccount) {
		t.Errorf("controller authenticates as %s", c.Username)
	}
}
