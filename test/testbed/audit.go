package testbed

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records who asked for which Secret, and nothing else: enough
// for test/security to tell which secrets a component read, at no cost to
// other tests.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
- level: None
`

// enableSecretAudit makes the API server log Secret requests to a file and
// returns its path.
func enableSecretAudit(t TB, env *envtest.Environment) string {
	t.Helper()
	dir := shortDir(t, "audit")
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", policy).Set("audit-log-path", log)
	return log
}
