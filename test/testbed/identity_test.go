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

// TestRefusal checks which log lines count as the API server refusing
// warmer's service accounts.
func TestRefusal(t *testing.T) {
	for line, want := range map[string]bool{
		`W0101 reflector.go:569] failed to list *v1.Secret: secrets is forbidden: User "system:serviceaccount:warmer-system:warmer-agent" cannot list resource "secrets" in API group "" at the cluster scope`:             true,
		`{"level":"error","msg":"Server rejected event (will not retry!)","error":"events.events.k8s.io is forbidden: User \"system:serviceaccount:warmer-system:warmer-controller\" cannot create resource \"events\""}`:  true,
		`{"level":"error","msg":"writing NodeWarm","error":"nodewarms.warmer.dev \"node-b\" is forbidden: ValidatingAdmissionPolicy 'warmer-agent-own-nodewarm' with binding 'warmer-agent-own-nodewarm' denied request"}`: true,
		`{"level":"error","error":"events.events.k8s.io \"x\" is forbidden: unable to create new content in namespace team-a because it is being terminated"}`:                                                             false,
		`secrets is forbidden: User "alice" cannot get resource "secrets" in the namespace "team-b"`:                                                                                                                       false,
	} {
		if got := refusal(line); got != want {
			t.Errorf("refusal(%s) = %v, want %v", line, got, want)
		}
	}
}
