package testbed

// StartFleetBeside runs warmer for a real node the way a Fleet runs it for
// simulated ones: the agent as a process beside the kubelet (so its log,
// /metrics and flags are the test's to read) and the controller, both
// against the node's API server, each with its service account's token and
// the shipped roles and policies (see StartFleet). It returns a Fleet of
// that one node, so that a real-node test uses the Fleet's helpers
// (NodeImage, ImageWarm, Metric...). Both processes stop at cleanup, before the node.
func StartFleetBeside(t TB, n *RealNode, agent AgentSettings) *Fleet {
	t.Helper()
	f := &Fleet{CP: n.ControlPlane, Bin: BuildWarmer(t), Nodes: map[string]*Node{}, AgentSettings: agent}
	node := &Node{Name: n.Name, Containerd: n.Containerd, CRI: n.Containerd.ImageService(t)}
	kubeconfig := n.AgentKubeconfig(t, n.Name)
	node.Agent, node.Metrics, node.Probe = startListening(t, "agent "+n.Name, func(metrics, probe string) []string {
		node.agentArgs = append([]string{f.Bin, "agent", "--kubeconfig", kubeconfig, "--node-name", n.Name,
			"--container-runtime-endpoint", n.Containerd.Endpoint, "--metrics-bind-address", metrics,
			"--health-probe-bind-address", probe}, agent.Flags()...)
		return node.agentArgs
	})
	f.Nodes[n.Name] = node
	f.Controller = f.StartController(t)
	if ft, ok := t.(interface{ Failed() bool }); ok {
		t.Cleanup(func() {
			if ft.Failed() {
				t.Logf("agent %s log:\n%s", n.Name, node.Agent.Log(60))
			}
		})
	}
	return f
}
