package deploy

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// nodeNameKey is the user extra in which the API server puts the node of
// a Pod-bound service-account token.
const nodeNameKey = "authentication.kubernetes.io/node-name"

// Service accounts of config/rbac.
const (
	agentUser      = "system:serviceaccount:" + systemNamespace + ":warmer-agent"
	controllerUser = "system:serviceaccount:" + systemNamespace + ":warmer-controller"
)

// serviceAccountGroups are the groups the API server gives every token of
// a service account in systemNamespace.
var serviceAccountGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"}

// agentImpersonation is who an agent's requests come from: its service
// account, with the node its Pod runs on as the API server records it for a
// Pod-bound token. An empty node leaves the extra out, as for a token that
// is not bound to a Pod.
func agentImpersonation(node string) rest.ImpersonationConfig {
	imp := rest.ImpersonationConfig{UserName: agentUser, Groups: serviceAccountGroups}
	if node != "" {
		imp.Extra = map[string][]string{nodeNameKey: {node}}
	}
	return imp
}

// controllerImpersonation is who the controller's requests come from.
func controllerImpersonation() rest.ImpersonationConfig {
	return rest.ImpersonationConfig{UserName: controllerUser, Groups: serviceAccountGroups}
}

// clientAs returns a client whose requests the admin config impersonates
// as imp: real requests, authorized by RBAC and admitted by the policies
// as if imp had sent them.
func clientAs(t *testing.T, cp *testbed.ControlPlane, imp rest.ImpersonationConfig) client.WithWatch {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = imp
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
