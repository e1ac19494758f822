package testbed

import (
	"os"
	"path/filepath"
)

// StartScheduler runs the real kube-scheduler from the node assets
// (NodeAssetsEnv) against the control plane, as the admin and without a
// serving port, and stops it at cleanup. Nodes made by CreateNode need
// NodeCapacity before it places a Pod on them.
func (cp *ControlPlane) StartScheduler(t TB) *Process {
	t.Helper()
	assets := os.Getenv(NodeAssetsEnv)
	if assets == "" {
		t.Fatal(NodeAssetsEnv + " is not set: run the tests through `make test`, which builds kube-scheduler")
	}
	return StartProcess(t, "kube-scheduler", filepath.Join(assets, "kube-scheduler"),
		"--kubeconfig="+cp.Kubeconfig, "--leader-elect=false", "--secure-port=0")
}
