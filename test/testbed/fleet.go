package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Fleet is a control plane, the warmer controller and simulated nodes, each
// a containerd with a Node object and a warmer agent process: the whole
// product, running from the built binary.
type Fleet struct {
	CP    *ControlPlane
	Bin   string
	Nodes map[string]*Node
	// Controller is the warmer controller process.
	Controller *Process
	// ControllerMetrics is the host:port of the controller's /metrics,
	// served over ControllerMetricsScheme: https, to authenticated
	// scrapers only, as shipped (ScrapeController reads it).
	ControllerMetrics       string
	ControllerMetricsScheme string
	// AgentSettings and ControllerSettings are what the agents and the
	// controller run with; tests derive their waits from them.
	AgentSettings      AgentSettings
	ControllerSettings ControllerSettings

	opts FleetOptions
}

// Node is one simulated node of a Fleet.
type Node struct {
	Name string
	// Containerd is the node's runtime; nil on a CRI-O fleet, whose
	// nodes have CRIO instead.
	Containerd *Containerd
	CRIO       *CRIO
	CRI        runtimeapi.ImageServiceClient
	Agent      *Process
	// Metrics is the host:port of the agent's /metrics.
	Metrics string
	// Probe is the host:port of the agent's /healthz and /readyz.
	Probe string

	agentArgs []string
}

// FleetOptions adjust a Fleet. The zero value gives the e2e settings.
type FleetOptions struct {
	// Agent are the agents' settings; nil: DefaultAgent.
	Agent *AgentSettings
	// Controller are the controller's settings; nil: DefaultController.
	Controller *ControllerSettings
	// ControllerFlags are added to the controller's command line.
	ControllerFlags []string
	// Containerd gives options for a node's containerd, by node name.
	Containerd func(node string) []ContainerdOption
	// CRIO runs CRI-O instead of containerd on every node, with these
	// options by node name (nil: none).
	CRIO     bool
	CRIOOpts func(node string) []CRIOOption
	// Plain runs every process from a build without the race detector
	// (BuildPlainWarmer), for a test that measures their memory or CPU.
	Plain bool
	// PlainAgents names nodes whose agent alone runs the plain build: the
	// test measures those, while the others are race-checked doing the
	// same work.
	PlainAgents []string
	// PlainController runs the controller alone from the plain build, for
	// a test that measures its memory while the agents stay race-checked:
	// the race detector takes several times a program's memory.
	PlainController bool
	// AgentCommand, when set, wraps a node's agent command line: to start
	// it in a memory cgroup with its shipped limit (MemoryCgroup.Command),
	// as the kubelet starts its container.
	AgentCommand func(node string, argv []string) []string
	// BeforeController runs after the agents start and before the
	// controller does: a test installs there what the controller's
	// flags need (an opt-in component's roles and policies).
	BeforeController func(t TB, cp *ControlPlane)
}

// StartFleet starts a control plane, one node (containerd, Node object with
// the given labels, agent) per entry of labels, and the controller. Agents'
// logs are printed when the test fails.
//
// The agents and the controller run as they are shipped: each with a token
// of its service account, bound by config/rbac's roles and checked by
// config/policy's admission policies, which the fleet installs from the
// repository (ControlPlane.AgentKubeconfig, ControllerKubeconfig). A
// permission the code needs and the manifests lack fails the test. The
// test's own client, CP.Client, stays the admin.
func StartFleet(t TB, labels map[string]map[string]string, opts FleetOptions) *Fleet {
	t.Helper()
	f := &Fleet{CP: StartControlPlane(t), Bin: BuildWarmer(t), Nodes: map[string]*Node{}, opts: opts,
		AgentSettings: DefaultAgent, ControllerSettings: DefaultController}
	if opts.Agent != nil {
		f.AgentSettings = *opts.Agent
	}
	if opts.Controller != nil {
		f.ControllerSettings = *opts.Controller
	}
	if opts.Plain {
		f.Bin = BuildPlainWarmer(t)
	}
	for name, l := range labels {
		n, endpoint := startRuntime(t, name, opts)
		f.CP.CreateNode(t, name, l)
		kubeconfig := f.CP.AgentKubeconfig(t, name)
		n.Agent, n.Metrics, n.Probe = startListening(t, "agent "+name, func(metrics, probe string) []string {
			n.agentArgs = append([]string{f.agentBin(t, name), "agent", "--kubeconfig", kubeconfig, "--node-name", name,
				"--container-runtime-endpoint", endpoint, "--metrics-bind-address", metrics,
				"--health-probe-bind-address", probe}, f.AgentSettings.Flags()...)
			if opts.AgentCommand != nil {
				n.agentArgs = opts.AgentCommand(name, n.agentArgs)
			}
			return n.agentArgs
		})
		f.Nodes[name] = n
	}
	if opts.BeforeController != nil {
		opts.BeforeController(t, f.CP)
	}
	f.Controller = f.StartController(t)
	if ft, ok := t.(interface{ Failed() bool }); ok {
		t.Cleanup(func() {
			if ft.Failed() {
				for _, n := range f.Nodes {
					t.Logf("agent %s log:\n%s", n.Name, n.Agent.Log(60))
				}
			}
		})
	}
	return f
}

// startRuntime starts the node's runtime, containerd or CRI-O, and returns
// the node with it and its CRI endpoint.
func startRuntime(t TB, name string, opts FleetOptions) (*Node, string) {
	n := &Node{Name: name}
	if opts.CRIO {
		var copts []CRIOOption
		if opts.CRIOOpts != nil {
			copts = opts.CRIOOpts(name)
		}
		n.CRIO = StartCRIO(t, name, copts...)
		n.CRI = n.CRIO.ImageService(t)
		return n, n.CRIO.Endpoint
	}
	var copts []ContainerdOption
	if opts.Containerd != nil {
		copts = opts.Containerd(name)
	}
	n.Containerd = StartContainerd(t, name, copts...)
	n.CRI = n.Containerd.ImageService(t)
	return n, n.Containerd.Endpoint
}

// agentBin is the binary the node's agent runs.
func (f *Fleet) agentBin(t TB, node string) string {
	if slices.Contains(f.opts.PlainAgents, node) {
		return BuildPlainWarmer(t)
	}
	return f.Bin
}

// controllerBin is the binary the controller runs.
func (f *Fleet) controllerBin(t TB) string {
	if f.opts.PlainController {
		return BuildPlainWarmer(t)
	}
	return f.Bin
}

// StartController starts a warmer controller against the fleet's control
// plane, with the warmer-controller service account's token and its
// leader election in SystemNamespace, as shipped; StartFleet already
// started one. A Fleet built by hand, with no ControllerSettings, gets
// DefaultController.
func (f *Fleet) StartController(t TB) *Process {
	t.Helper()
	if f.ControllerSettings == (ControllerSettings{}) {
		f.ControllerSettings = DefaultController
	}
	kubeconfig := f.CP.ControllerKubeconfig(t)
	var args []string
	p, metrics, _ := startListening(t, "controller", func(metrics, probe string) []string {
		args = append([]string{f.controllerBin(t), "controller", "--kubeconfig", kubeconfig,
			"--leader-election-namespace", SystemNamespace,
			"--metrics-bind-address", metrics, "--health-probe-bind-address", probe}, f.ControllerSettings.Flags()...)
		args = append(args, f.opts.ControllerFlags...)
		return args
	})
	f.ControllerMetrics, f.ControllerMetricsScheme = metrics, metricsScheme(args)
	return p
}

// startListening starts a warmer process on the command line argv returns
// for two loopback addresses, and waits until its /metrics and /healthz
// answer. Another process may take a port FreePort picked before the child
// binds it; then it starts again on new ports.
func startListening(t TB, name string, argv func(metrics, probe string) []string) (p *Process, metrics, probe string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		metrics, probe = fmt.Sprintf("127.0.0.1:%d", FreePort(t)), fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		args := argv(metrics, probe)
		p = StartProcess(t, name, args...)
		err := waitListening(p, metricsScheme(args), metrics, probe)
		if err == nil {
			return p, metrics, probe
		}
		if attempt == 3 || !strings.Contains(p.Log(5), "address already in use") {
			t.Fatalf("%s: %v\n%s", name, err, p.Log(30))
		}
	}
}

// waitListening polls the process's /metrics, served over scheme, and its
// /healthz until each answers or the process exits.
func waitListening(p *Process, scheme, metrics, probe string) error {
	deadline := time.Now().Add(60 * time.Second)
	c := http.Client{Timeout: 2 * time.Second}
	for _, u := range []string{"metrics", "healthz"} {
		for {
			if p.Exited() {
				return fmt.Errorf("exited before its /%s answered", u)
			}
			var status int
			var err error
			if u == "metrics" {
				status, _, err = GetMetrics(scheme, metrics, "")
			} else {
				var resp *http.Response
				if resp, err = c.Get("http://" + probe + "/healthz"); err == nil {
					status = resp.StatusCode
					_ = resp.Body.Close()
				}
			}
			if err == nil && (u == "healthz" && status == http.StatusOK || u == "metrics" && metricsAnswers(scheme, status)) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("/%s not answering before the deadline", u)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// RestartAgent starts the node's agent again with the same command line,
// after the caller stopped or killed it.
func (n *Node) RestartAgent(t TB) {
	t.Helper()
	n.Agent = StartProcess(t, "agent "+n.Name, n.agentArgs...)
}

// Eventually retries check every 250 ms until it returns nil or the timeout
// passes.
func Eventually(t TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	Poll(t, 250*time.Millisecond, timeout, what, check)
}

// Poll retries check every interval until it returns nil, or fails the
// test once timeout has passed. Benchmarks that time what they wait for
// poll more often than Eventually.
func Poll(t TB, interval, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// Present says whether the node's runtime holds ref.
func (n *Node) Present(t TB, ref string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.CRI.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s on %s: %v", ref, n.Name, err)
	}
	return resp.Image != nil
}

// AllPresent returns an error naming the first ref the node lacks.
func (n *Node) AllPresent(t TB, refs ...string) error {
	for _, r := range refs {
		if !n.Present(t, r) {
			return fmt.Errorf("%s lacks %s", n.Name, r)
		}
	}
	return nil
}

// Remove deletes ref from the node's runtime, as image GC would.
func (n *Node) Remove(t TB, ref string) {
	t.Helper()
	if _, err := n.CRI.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("removing %s on %s: %v", ref, n.Name, err)
	}
}

// NodeWarm reads a node's NodeWarm.
func (f *Fleet) NodeWarm(node string) (*warmv1.NodeWarm, error) {
	var nw warmv1.NodeWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw); err != nil {
		return nil, err
	}
	return &nw, nil
}

// NodeImage returns the NodeWarm entry for a normalised image on a node.
func (f *Fleet) NodeImage(node, image string) (warmv1.NodeImage, error) {
	nw, err := f.NodeWarm(node)
	if err != nil {
		return warmv1.NodeImage{}, err
	}
	for _, img := range nw.Status.Images {
		if img.Image == image {
			return img, nil
		}
	}
	return warmv1.NodeImage{}, fmt.Errorf("NodeWarm %s does not list %s (has %d images)", node, image, len(nw.Status.Images))
}

// ImageWarm reads an ImageWarm.
func (f *Fleet) ImageWarm(t TB, ns, name string) *warmv1.ImageWarm {
	t.Helper()
	var iw warmv1.ImageWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &iw); err != nil {
		t.Fatal(err)
	}
	return &iw
}

// Create creates obj or fails the test.
func (f *Fleet) Create(t TB, obj client.Object) {
	t.Helper()
	if err := f.CP.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// Events lists the events.k8s.io events about an ImageWarm with a reason
// (any reason when empty).
func (f *Fleet) Events(t TB, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := f.CP.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

// Metric returns the sum of a metric's samples whose lines contain every
// fragment, scraped from the node agent's /metrics.
func (n *Node) Metric(t TB, name string, fragments ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Metrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", n.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, fr := range fragments {
			ok = ok && strings.Contains(line, fr)
		}
		if ok {
			var v float64
			_, _ = fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}
