package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// scalePullLatency is each fake pull's duration: about a 20 MB image's
// pull on this machine's containerd (docs/performance.md).
const scalePullLatency = 150 * time.Millisecond

// wavePullLatency is each fake pull's duration in a fleet run in waves:
// ten images three at a time take a node about a second, so that the
// waves' pace, not the API server's, is what the run shows (issue 23
// asks for pulls of about a second).
const wavePullLatency = 300 * time.Millisecond

// pullLatency is c's fake pull duration.
func (c scaleCase) pullLatency() time.Duration {
	if c.wave > 0 {
		return wavePullLatency
	}
	return scalePullLatency
}

// scaleCase is one fleet run: n simulated nodes, one ImageWarm of images,
// with spec.rollout.maxPulling wave when wave is above zero.
type scaleCase struct{ n, images, wave int }

// scaleCases are the runs BENCH_SCALE asks for, comma separated, each N
// (ten images) or NxI (I images), optionally followed by wW (waves of at
// most W nodes pulling): by default 100, under BENCH_FULL=1 100, 300 and
// 1,000 nodes with ten images, 1,000 with a hundred, 1,000 with ten in
// waves of 100, and 5,000 with ten (about 10 GB and 7 minutes here).
func scaleCases(b *testing.B) []scaleCase {
	b.Helper()
	spec := os.Getenv("BENCH_SCALE")
	if spec == "" {
		spec = "100"
		if full() {
			spec = "100,300,1000,1000x100,1000w100,5000"
		}
	}
	var out []scaleCase
	for _, f := range strings.Split(spec, ",") {
		fleet, wave, waves := strings.Cut(strings.TrimSpace(f), "w")
		nodes, images, found := strings.Cut(fleet, "x")
		c := scaleCase{images: 10}
		var err error
		c.n, err = strconv.Atoi(nodes)
		if found && err == nil {
			c.images, err = strconv.Atoi(images)
		}
		if waves && err == nil {
			c.wave, err = strconv.Atoi(wave)
			if c.wave < 1 {
				err = fmt.Errorf("waves of %d", c.wave)
			}
		}
		if err != nil || c.n < 1 || c.images < 1 || c.images > warmv1.MaxImagesPerWarm {
			b.Fatalf("BENCH_SCALE=%q: %q is not a fleet (N, NxImages, either followed by wMaxPulling)", spec, f)
		}
		out = append(out, c)
	}
	return out
}

// BenchmarkScale runs N simulated agents (the real agent code, fake
// runtimes; see test/scale) and the real controller binary against one
// API server with the manifests' FlowSchema, then times one ImageWarm of
// ten (or a hundred) images over all N nodes from creation to Ready and
// against the last pull, counts what it cost the API server (writes,
// 429 answers, watch bytes, from its own metrics scraped before and
// after) and the controller's process, and extrapolates the API server's
// load to 10,000 nodes.
func BenchmarkScale(b *testing.B) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel))) // errors only; agents' chatter would drown the table
	raiseFileLimit(b)
	for _, c := range scaleCases(b) {
		name := fmt.Sprintf("images=%d/N=%d", c.images, c.n)
		if c.wave > 0 {
			name += fmt.Sprintf("/maxPulling=%d", c.wave)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				runScale(b, c)
			}
		})
	}
}

// raiseFileLimit raises the open-file limit, as root may: a thousand
// agents in one process hold a thousand connections and more at times.
func raiseFileLimit(b *testing.B) {
	b.Helper()
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Logf("raising the open-file limit: %v", err)
	}
}

// scaleResult is what one fleet run measured.
type scaleResult struct {
	scaleCase
	pulled, ready  time.Duration   // from the ImageWarm's creation
	reported       time.Duration   // the last node's first all-Present NodeWarm, from the creation; 0 if not every node's was seen
	reportLags     []time.Duration // each node's all-Present NodeWarm after its own last pull, sorted
	reportReopened int             // times that watch was closed by the API server and opened again
	// nodeWarmPut is the mean time the API server took over a NodeWarm
	// status write (queueing included); queued the mean time a request
	// of the agents' priority level waited in its queue (0: none queued).
	nodeWarmPut, queued time.Duration
	// apiCPU is the API server's CPU over the window, apiRSS its
	// resident memory at the end (its own process metrics).
	apiCPU              time.Duration
	apiRSS              int64
	agentRequests       float64            // requests the agents' priority level dispatched
	reads               map[string]float64 // requests other than writes, by verb and resource
	writes              map[string]float64 // by resource[/subresource]
	watchBytes          map[string]float64 // bytes of watch events sent, by resource
	bodyBytes           float64            // bytes of write request bodies: what went to etcd
	nodeWarmBytes       int                // all NodeWarms' JSON at the end: what etcd holds of them
	statusBytes         int
	ctrlCPU             time.Duration
	ctrlRSS, ctrlPeak   int64
	simCPU              time.Duration
	simRSS              int64
	window              time.Duration
	nodeWarmWritesTotal float64
	ctrlRestarts        int
	simFDs              int     // open files of the simulation process
	throttled, rejected float64 // 429 answers; requests priority and fairness turned away
	// refusals counts the 429 answers by resource and verb, and priority
	// and fairness's rejections by priority level and reason.
	refusals   map[string]float64
	flowSchema bool // the agents ran in config/flowcontrol's priority level
	// answers403 and answers422 are the refusals the agents' clients
	// counted (a run with any fails).
	answers403, answers422 int
	// peakPulling is the most nodes that pulled one image at once.
	peakPulling int
	// nodeWarm is the mean of the nodes' warms, each from its first
	// pull's start to its last pull's end; firstPull is when the fleet's
	// first pull began, from the ImageWarm's creation.
	nodeWarm, firstPull time.Duration
}

// simFleet is a control plane with warmer's controller binary and a
// fleet of simulated agents running against it.
type simFleet struct {
	cp         *testbed.ControlPlane
	ctrlArgs   []string
	ctrl       *testbed.Process
	agents     *scale.Fleet
	flowSchema bool // the agents run in config/flowcontrol's priority level
	// policies says whether config/policy is installed; setup is the API
	// server's metrics before the agents started, against which the run's
	// refusals are counted.
	policies bool
	setup    map[string]float64
	started  time.Time // when the agents started
}

// fleetPlane shapes a fleet's control plane beyond its size.
type fleetPlane struct {
	// withoutPolicies leaves config/policy out (the shipped roles stay),
	// to tell what the policies cost.
	withoutPolicies bool
	// joining is a fleet measured as it joins: every Node registered
	// with the agents' startup taint, and startSimFleet returning once
	// every agent has reported, without letting start-up traffic settle.
	joining bool
	// before runs once the identity is installed and before the agents
	// start: an ImageWarm that must exist when they join.
	before func(cp *testbed.ControlPlane)
}

// startSimFleet starts a control plane with n nodes, warmer's identity as
// shipped (config/rbac's roles, config/policy's admission policies unless
// plane says otherwise), the controller as its own process with its
// service account's token and n simulated agents with opts (its Config is
// set here: each agent its own Pod-bound token), and waits until every
// agent has written its NodeWarm and the start-up traffic has settled.
func startSimFleet(b *testing.B, n int, opts scale.Options, plane fleetPlane) *simFleet {
	cp := testbed.StartControlPlane(b)
	createNodes(b, cp, n, plane.joining)
	f := &simFleet{cp: cp, flowSchema: os.Getenv("BENCH_SCALE_NO_FLOWSCHEMA") != "1", policies: !plane.withoutPolicies}
	// After the Nodes: the bed's wait for the Node policy needs one.
	if f.policies {
		cp.InstallIdentity(b)
	} else {
		cp.InstallRolesWithoutPolicies(b)
	}
	agentCfgs := agentConfigs(b, cp, n)
	// The manifests' FlowSchema for the agents, as an install has it;
	// BENCH_SCALE_NO_FLOWSCHEMA=1 leaves them in workload-low, to compare.
	if f.flowSchema {
		applyFlowControl(b, cp, agentCfgs[nodeName(0)])
	}
	if plane.before != nil {
		plane.before(cp)
	}
	f.ctrlArgs = []string{testbed.BuildPlainWarmer(b), "controller", "--kubeconfig", cp.ControllerKubeconfig(b),
		"--leader-election-namespace", testbed.SystemNamespace, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	f.ctrl = testbed.StartProcess(b, "controller", f.ctrlArgs...)
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	opts.Config = func(node string) *rest.Config { return agentCfgs[node] }
	opts.Scheme = testbed.Scheme()
	f.setup, f.started = apiMetrics(b, cp.Config), time.Now()
	agents, err := scale.Start(opts, names)
	if err != nil {
		b.Fatal(err)
	}
	f.agents = agents
	b.Cleanup(func() {
		if err := agents.Stop(); err != nil {
			b.Logf("simulated agents: %v", err)
		}
	})
	f.waitNodeWarms(b, n)
	if !plane.joining {
		time.Sleep(3 * time.Second) // let start-up traffic settle out of the window
	}
	return f
}

// agentConfigs gives each node's agent its own identity, as its Pod's
// token would: the warmer-agent service account with the node's name in
// the user's extra, where config/policy reads it. Each agent's client
// sends only its own token, so every request of the fleet carries the
// node it comes from, however many agents share the process.
func agentConfigs(b *testing.B, cp *testbed.ControlPlane, n int) map[string]*rest.Config {
	b.Helper()
	cfgs := make(map[string]*rest.Config, n)
	for i := range n {
		cfg := cp.AgentConfig(b, nodeName(i))
		// A real agent has no client-side rate limit (see cmd/warmer):
		// the server's priority and fairness is what holds back a fleet.
		cfg.QPS, cfg.Burst = -1, 0
		// Each agent its own connection, as from its own Pod: client-go
		// otherwise shares one transport between equal configs, and a
		// thousand agents' watches and writes over a few shared HTTP/2
		// connections overflowed their streams into bursts of new
		// connections (over 20,000 open files at once).
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		cfgs[nodeName(i)] = cfg
	}
	return cfgs
}

// failIfRefused fails the run at once if an agent has been answered 403
// or 422: an agent refused its NodeWarm or its Node's patch would
// otherwise only keep the run waiting until its deadline.
func (f *simFleet) failIfRefused(b *testing.B) {
	b.Helper()
	if n403, n422 := f.agents.Answers.Count(http.StatusForbidden), f.agents.Answers.Count(http.StatusUnprocessableEntity); n403+n422 > 0 {
		b.Fatalf("the agents were answered 403 %d times and 422 %d times under the shipped roles and policies (policies installed: %v)", n403, n422, f.policies)
	}
}

// checkAnswers fails the run if the API server refused anything since
// the agents started: a 403 (RBAC, an admission policy) or a 422
// (validation) answered to an agent, as the agents' clients counted, or
// to anyone, as the API server's apiserver_request_total counts (the
// controller's included). A fleet whose writes were refused must not
// pass for a warm one. after is a scrape taken after the run.
func (f *simFleet) checkAnswers(b *testing.B, after map[string]float64) (agents403, agents422 int) {
	b.Helper()
	agents403, agents422 = f.agents.Answers.Count(http.StatusForbidden), f.agents.Answers.Count(http.StatusUnprocessableEntity)
	server := map[string]float64{}
	for _, code := range []string{"403", "422"} {
		for k, v := range after {
			if strings.HasPrefix(k, "apiserver_request_total{") && label(k, "code") == code {
				if d := v - f.setup[k]; d > 0 {
					server[code+" "+label(k, "verb")+" "+label(k, "resource")+"/"+label(k, "subresource")] += d
				}
			}
		}
	}
	if agents403+agents422 > 0 || len(server) > 0 {
		b.Fatalf("the API server refused requests under the shipped roles and policies (policies installed: %v): agents' clients got %d answers 403 and %d answers 422; the API server's counts by code, verb and resource: %v",
			f.policies, agents403, agents422, server)
	}
	return agents403, agents422
}

func runScale(b *testing.B, c scaleCase) {
	ctx := context.Background()
	// BENCH_SCALE_NO_EVENTS=1: agents without events, an experiment to
	// tell what events cost (docs/performance.md).
	gauge := scale.NewPullGauge()
	sim := startSimFleet(b, c.n, scale.Options{PullLatency: c.pullLatency(), NoEvents: os.Getenv("BENCH_SCALE_NO_EVENTS") == "1", Gauge: gauge}, fleetPlane{})
	cp, ctrlArgs, ctrlProc, fleet := sim.cp, sim.ctrlArgs, sim.ctrl, sim.agents
	r := scaleResult{scaleCase: c, flowSchema: sim.flowSchema}

	before := apiMetrics(b, cp.Config)
	ctrlBefore, simBefore := readProc(b, ctrlProc.Pid()), readProc(b, os.Getpid())
	iw := fleetWarm(c)
	reports := watchReports(b, cp, c.images)
	start := time.Now()
	if err := cp.Client.Create(ctx, iw); err != nil {
		b.Fatal(err)
	}
	lastLog := time.Now()
	deadline := start.Add(10 * time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("ImageWarm not Ready on %d nodes within 10 minutes: %+v", c.n, iw.Status.Nodes)
		}
		if r.pulled == 0 {
			if last, ok := lastPull(fleet, c.images); ok {
				r.pulled = last.Sub(start)
			}
		}
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, iw); err != nil {
			b.Fatal(err)
		}
		if meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) && int(iw.Status.Nodes.Ready) == c.n {
			r.ready = time.Since(start)
			break
		}
		sim.failIfRefused(b)
		if ctrlProc.Exited() {
			// As its Deployment would, start it again; the run reports
			// the restart, and the CPU figure covers the last process only.
			b.Logf("controller exited at %v; restarting it. Its log:\n%s", time.Since(start).Round(time.Second), ctrlProc.Log(5))
			ctrlProc = testbed.StartProcess(b, "controller", ctrlArgs...)
			ctrlBefore = procStat{}
			r.ctrlRestarts++
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			b.Logf("%v: ImageWarm nodes %+v", time.Since(start).Round(time.Second), iw.Status.Nodes)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.pulled == 0 {
		b.Fatalf("ImageWarm Ready on %d nodes but not every fake runtime holds %d images", c.n, c.images)
	}
	// Trailing writes (a last status, events in flight) belong to the warm.
	time.Sleep(5 * time.Second)
	after := apiMetrics(b, cp.Config)
	r.window = time.Since(start)
	r.answers403, r.answers422 = sim.checkAnswers(b, after)
	ctrlAfter, simAfter := readProc(b, ctrlProc.Pid()), readProc(b, os.Getpid())
	r.ctrlCPU, r.ctrlRSS, r.ctrlPeak = ctrlAfter.cpu-ctrlBefore.cpu, ctrlAfter.rss, peakRSS(b, ctrlProc.Pid())
	r.simCPU, r.simRSS = simAfter.cpu-simBefore.cpu, simAfter.rss
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		r.simFDs = len(fds)
	}
	r.writes = writesByResource(before, after)
	r.watchBytes = bytesByResource(before, after, "apiserver_watch_events_sizes_sum")
	for _, v := range bytesByResource(before, after, "apiserver_request_body_size_bytes_sum") {
		r.bodyBytes += v
	}
	r.nodeWarmWritesTotal = r.writes["nodewarms"] + r.writes["nodewarms/status"]
	r.throttled = sumSamples(after, "apiserver_request_total", `code="429"`) - sumSamples(before, "apiserver_request_total", `code="429"`)
	r.rejected = sumSamples(after, "apiserver_flowcontrol_rejected_requests_total") - sumSamples(before, "apiserver_flowcontrol_rejected_requests_total")
	r.refusals = refusals(before, after)
	r.peakPulling = gauge.Peak()
	if last, ok := reports.last(c.n); ok {
		r.reported = last.Sub(start)
	}
	r.reportLags, r.reportReopened = reports.lags(fleet), reports.reopened()
	r.nodeWarmPut = meanOf(before, after, "apiserver_request_duration_seconds", `resource="nodewarms"`, `subresource="status"`, `verb="PUT"`)
	r.apiCPU = time.Duration((sumSamples(after, "process_cpu_seconds_total") - sumSamples(before, "process_cpu_seconds_total")) * float64(time.Second))
	r.apiRSS = int64(sumSamples(after, "process_resident_memory_bytes"))
	r.agentRequests = sumSamples(after, "apiserver_flowcontrol_dispatched_requests_total", `priority_level="warmer-agents"`) -
		sumSamples(before, "apiserver_flowcontrol_dispatched_requests_total", `priority_level="warmer-agents"`)
	r.reads = readsByResource(before, after)
	r.queued = meanOf(before, after, "apiserver_flowcontrol_request_wait_duration_seconds", `priority_level="warmer-agents"`)
	first, mean := busy(fleet)
	r.firstPull, r.nodeWarm = first.Sub(start), mean
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, iw); err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(iw.Status)
	r.statusBytes = len(raw)
	r.nodeWarmBytes = nodeWarmBytes(b, cp)
	reportScale(b, r)
}

// fleetWarm is the run's ImageWarm, default/fleet: c.images images on
// every node, in waves of c.wave when it is set.
func fleetWarm(c scaleCase) *warmv1.ImageWarm {
	refs := make([]string, c.images)
	for i := range refs {
		refs[i] = fmt.Sprintf("127.0.0.1:5000/scale/app%d:v1", i)
	}
	iw := build.ImageWarm("default", "fleet", build.Images(refs...))
	if c.wave > 0 {
		wave := intstr.FromInt(c.wave)
		iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: &wave}
	}
	return iw
}

// lastPull is when the last of the fleet's pulls completed, once every
// fake runtime has pulled images.
func lastPull(f *scale.Fleet, images int) (time.Time, bool) {
	var last time.Time
	for _, rt := range f.Runtimes {
		n, t := rt.Pulls()
		if n < images {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t
		}
	}
	return last, true
}

// busy is the mean of the fleet's runtimes' warms and when the first
// pull of all began.
func busy(f *scale.Fleet) (first time.Time, mean time.Duration) {
	var sum time.Duration
	for _, rt := range f.Runtimes {
		began, d := rt.Busy()
		sum += d
		if first.IsZero() || began.Before(first) {
			first = began
		}
	}
	return first, sum / time.Duration(max(len(f.Runtimes), 1))
}

// nodeWarmBytes is the size of every NodeWarm as JSON, managed fields
// included: about what etcd holds of them.
func nodeWarmBytes(b *testing.B, cp *testbed.ControlPlane) int {
	b.Helper()
	var list warmv1.NodeWarmList
	if err := cp.Client.List(context.Background(), &list); err != nil {
		b.Fatal(err)
	}
	total := 0
	for i := range list.Items {
		raw, _ := json.Marshal(&list.Items[i])
		total += len(raw)
	}
	return total
}

// applyFlowControl applies config/flowcontrol and waits until the API
// server classifies the agents' requests into its priority level.
func applyFlowControl(b *testing.B, cp *testbed.ControlPlane, agentCfg *rest.Config) {
	b.Helper()
	if out, err := cp.Kubectl(b, "apply", "-k", filepath.Join(testbed.RepoRoot(b), "config", "flowcontrol")); err != nil {
		b.Fatalf("applying config/flowcontrol: %v\n%s", err, out)
	}
	var pl flowcontrolv1.PriorityLevelConfiguration
	if err := cp.Client.Get(context.Background(), types.NamespacedName{Name: "warmer-agents"}, &pl); err != nil {
		b.Fatal(err)
	}
	rt, err := rest.TransportFor(agentCfg)
	if err != nil {
		b.Fatal(err)
	}
	eventually(b, time.Minute, "the agents' requests classified into warmer-agents", func() error {
		// A request the agent's role allows: a refused one would count
		// against the run's answers.
		req, err := http.NewRequest(http.MethodGet, agentCfg.Host+"/api/v1/nodes/"+nodeName(0), nil)
		if err != nil {
			return err
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"); got != string(pl.UID) {
			return fmt.Errorf("priority level %q, not warmer-agents", got)
		}
		return nil
	})
}

func nodeName(i int) string { return fmt.Sprintf("sim-%04d", i) }

// createNodes registers n Node objects, as n kubelets would, with the
// agents' startup taint if tainted.
func createNodes(b *testing.B, cp *testbed.ControlPlane, n int, tainted bool) {
	b.Helper()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i),
					Labels: map[string]string{corev1.LabelHostname: nodeName(i), "pool": "sim"}}}
				if tainted {
					node.Spec.Taints = []corev1.Taint{{Key: agent.DefaultStartupTaintKey, Effect: corev1.TaintEffectNoSchedule}}
				}
				if err := cp.Client.Create(context.Background(), node); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating nodes: %v", err)
	}
}

// waitNodeWarms waits until every agent has created its NodeWarm and
// reported its runtime.
func (f *simFleet) waitNodeWarms(b *testing.B, n int) {
	b.Helper()
	eventually(b, 10*time.Minute, fmt.Sprintf("%d agents report", n), func() error {
		f.failIfRefused(b)
		var list warmv1.NodeWarmList
		if err := f.cp.Client.List(context.Background(), &list); err != nil {
			return err
		}
		up := 0
		for _, nw := range list.Items {
			if meta.IsStatusConditionTrue(nw.Status.Conditions, "RuntimeReady") {
				up++
			}
		}
		if up < n {
			time.Sleep(time.Second)
			return fmt.Errorf("%d of %d NodeWarms report a runtime", up, n)
		}
		return nil
	})
}

// writesByResource is the increase of apiserver_request_total for
// mutating verbs answered with success, by resource (and subresource):
// the writes that happened. Requests turned away (429) are counted apart.
func writesByResource(before, after map[string]float64) map[string]float64 {
	return requestIncrease(before, after, func(k string) (string, bool) {
		switch label(k, "verb") {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			return "", false
		}
		if !strings.HasPrefix(label(k, "code"), "2") {
			return "", false
		}
		res := label(k, "resource")
		if sub := label(k, "subresource"); sub != "" {
			res += "/" + sub
		}
		return res, true
	})
}

// readsByResource counts the window's requests other than writes, by
// verb and resource: what the fleet asks besides its reports.
func readsByResource(before, after map[string]float64) map[string]float64 {
	return requestIncrease(before, after, func(k string) (string, bool) {
		switch verb := label(k, "verb"); verb {
		case "GET", "LIST", "WATCH":
			return verb + " " + label(k, "resource"), true
		}
		return "", false
	})
}

// requestIncrease sums the increase of each apiserver_request_total
// series between two scrapes under the key its labels give (false:
// not counted).
func requestIncrease(before, after map[string]float64, key func(series string) (string, bool)) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		if name, ok := key(k); ok {
			if d := v - before[k]; d > 0 {
				out[name] += d
			}
		}
	}
	return out
}

// refusals breaks down the window's 429 answers (by resource and verb)
// and priority and fairness's rejections (by priority level and reason),
// to tell whose requests were refused and why.
func refusals(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		switch {
		case strings.HasPrefix(k, "apiserver_request_total{") && label(k, "code") == "429":
			out["429 "+label(k, "resource")+" "+label(k, "verb")] += d
		case strings.HasPrefix(k, "apiserver_flowcontrol_rejected_requests_total{"):
			out["rejected "+label(k, "priority_level")+" "+label(k, "reason")] += d
		}
	}
	return out
}

// bytesByResource is the increase of a byte-counting sum (a histogram's
// _sum) by resource.
func bytesByResource(before, after map[string]float64, metric string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, metric+"{") {
			continue
		}
		if d := v - before[k]; d > 0 {
			out[label(k, "resource")] += d
		}
	}
	return out
}

// label extracts one label's value from a sample's name and labels.
func label(sample, name string) string {
	i := strings.Index(sample, name+`="`)
	if i < 0 || (i > 0 && sample[i-1] != '{' && sample[i-1] != ',') {
		return ""
	}
	rest := sample[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// peakRSS is VmHWM, the process's highest resident memory.
func peakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func reportScale(b *testing.B, r scaleResult) {
	b.Helper()
	var total, watch float64
	keys := make([]string, 0, len(r.writes))
	for k, v := range r.writes {
		total += v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, v := range r.watchBytes {
		watch += v
	}
	lag := r.ready - r.pulled
	w := os.Stdout
	fmt.Fprintf(w, "\nFleet of %d simulated agents, one ImageWarm of %d images (fake pulls of %v); agents' FlowSchema applied: %v\n",
		r.n, r.images, r.pullLatency(), r.flowSchema)
	fmt.Fprintf(w, "last pull %.2fs, ImageWarm Ready %.2fs (%.2fs after the last pull); status %d bytes; window %.0fs\n",
		r.pulled.Seconds(), r.ready.Seconds(), lag.Seconds(), r.statusBytes, r.window.Seconds())
	if r.reported > 0 {
		// Where the time after the last pull went: the agents' reports
		// reaching the API server, then the controller's summary.
		fmt.Fprintf(w, "last node's report of every image Present seen %.2fs (%.2fs after the last pull); ImageWarm Ready %.2fs after it\n",
			r.reported.Seconds(), (r.reported - r.pulled).Seconds(), (r.ready - r.reported).Seconds())
		b.ReportMetric((r.reported - r.pulled).Seconds(), "report-after-pull-s")
		b.ReportMetric((r.ready - r.reported).Seconds(), "ready-after-report-s")
	}
	fmt.Fprintf(w, "API server (its own process): CPU %.1fs (%.0f millicores over the window), RSS %.0f MiB at the end\n",
		r.apiCPU.Seconds(), 1000*r.apiCPU.Seconds()/r.window.Seconds(), mib(r.apiRSS))
	b.ReportMetric(r.apiCPU.Seconds(), "api-cpu-s")
	b.ReportMetric(mib(r.apiRSS), "api-rss-MiB")
	fmt.Fprintf(w, "the agents' priority level dispatched %.0f requests (%.2f a node); reads:", r.agentRequests, r.agentRequests/float64(r.n))
	for _, k := range slices.Sorted(maps.Keys(r.reads)) {
		fmt.Fprintf(w, " %s %.0f;", k, r.reads[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "a NodeWarm status write took the API server %.0f ms on average; the agents' requests waited %.0f ms on average in their priority level's queue\n",
		1000*r.nodeWarmPut.Seconds(), 1000*r.queued.Seconds())
	b.ReportMetric(1000*r.nodeWarmPut.Seconds(), "nw-put-ms")
	if l := r.reportLags; len(l) > 0 {
		fmt.Fprintf(w, "a node's report of every image Present after its own last pull (%d nodes seen; the watch opened again %d times): median %.2fs, 90th percentile %.2fs, most %.2fs\n",
			len(l), r.reportReopened, quantile(l, 0.5).Seconds(), quantile(l, 0.9).Seconds(), l[len(l)-1].Seconds())
	}
	wave := "no rollout bound"
	if r.wave > 0 {
		wave = fmt.Sprintf("rollout maxPulling %d", r.wave)
	}
	fmt.Fprintf(w, "most nodes pulling one image at once: %d (%s)\n", r.peakPulling, wave)
	if r.wave > 0 {
		waves := (r.n + r.wave - 1) / r.wave
		fmt.Fprintf(w, "%d waves x a node's warm (%.2fs, mean) = %.2fs; Ready %.2fs is %.2fx that; the first pull began at %.2fs, so a wave took %.2fs\n",
			waves, r.nodeWarm.Seconds(), r.wavesTime().Seconds(), r.ready.Seconds(), r.ready.Seconds()/r.wavesTime().Seconds(),
			r.firstPull.Seconds(), (r.pulled-r.firstPull).Seconds()/float64(waves))
		b.ReportMetric(r.wavesTime().Seconds(), "waves-x-warm-s")
	}
	fmt.Fprintf(w, "API server: %.0f answers 429, %.0f requests rejected by priority and fairness\n", r.throttled, r.rejected)
	for _, k := range slices.Sorted(maps.Keys(r.refusals)) {
		fmt.Fprintf(w, "  %s: %.0f\n", k, r.refusals[k])
	}
	if r.ctrlRestarts > 0 {
		fmt.Fprintf(w, "the controller lost its lease and was restarted %d time(s)\n", r.ctrlRestarts)
	}
	fmt.Fprintf(w, "controller (its own process): CPU %.2fs (%.0f millicores over the window), RSS %.0f MiB at the end (peak %.0f MiB); simulation process: CPU %.1fs, RSS %.0f MiB, %d open files\n",
		r.ctrlCPU.Seconds(), 1000*r.ctrlCPU.Seconds()/r.window.Seconds(), mib(r.ctrlRSS), mib(r.ctrlPeak), r.simCPU.Seconds(), mib(r.simRSS), r.simFDs)
	fmt.Fprintf(w, "| %-28s | %8s | %9s |\n|------------------------------|---------:|----------:|\n", "writes (resource)", "total", "per node")
	for _, k := range keys {
		fmt.Fprintf(w, "| %-28s | %8.0f | %9.2f |\n", k, r.writes[k], r.writes[k]/float64(r.n))
	}
	fmt.Fprintf(w, "| %-28s | %8.0f | %9.2f |\n", "all", total, total/float64(r.n))
	fmt.Fprintf(w, "watch events sent: %.0f bytes (", watch)
	for _, k := range slices.Sorted(maps.Keys(r.watchBytes)) {
		fmt.Fprintf(w, " %s %.0f", k, r.watchBytes[k])
	}
	fmt.Fprintf(w, " ); write bodies %.0f bytes; NodeWarms stored %d bytes\n", r.bodyBytes, r.nodeWarmBytes)
	m := modelAt(r, modelNodes)
	fmt.Fprintf(w, "Model at %d nodes, from these per-node figures (docs/performance.md): %.0f writes/s and %.1f MB/s of watch events over a warm like this one; etcd holds %.1f MB of NodeWarms and takes %.1f MB of writes per warm\n\n",
		modelNodes, m.writesPerSec, m.watchMBPerSec, m.etcdLiveMB, m.etcdWrittenMB)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.ready.Seconds(), "ready-s")
	b.ReportMetric(r.pulled.Seconds(), "pulled-s")
	b.ReportMetric(lag.Seconds(), "ready-after-pull-s")
	b.ReportMetric(r.throttled, "answers-429")
	b.ReportMetric(float64(r.answers403), "answers-403")
	b.ReportMetric(float64(r.answers422), "answers-422")
	b.ReportMetric(float64(r.peakPulling), "peak-pulling")
	b.ReportMetric(total, "api-writes")
	b.ReportMetric(r.nodeWarmWritesTotal/float64(r.n), "nw-writes/node")
	b.ReportMetric(total/float64(r.n), "writes/node")
	b.ReportMetric(float64(r.statusBytes), "status-B")
	b.ReportMetric(r.ctrlCPU.Seconds(), "ctrl-cpu-s")
	b.ReportMetric(mib(r.ctrlPeak), "ctrl-peak-MiB")
	b.ReportMetric(mib(r.ctrlRSS), "ctrl-rss-MiB")
	b.ReportMetric(float64(r.ctrlRestarts), "ctrl-restarts")
	b.ReportMetric(m.writesPerSec, "10k-writes/s")
	b.ReportMetric(m.watchMBPerSec, "10k-watch-MB/s")
	b.ReportMetric(m.etcdLiveMB, "10k-etcd-live-MB")
	b.ReportMetric(m.etcdWrittenMB, "10k-etcd-MB/warm")
}

// wavesTime is how long r's waves would take back to back: as many waves
// as maxPulling divides the fleet into, times a node's mean warm.
func (r scaleResult) wavesTime() time.Duration {
	return time.Duration((r.n+r.wave-1)/r.wave) * r.nodeWarm
}

// modelNodes is the fleet the API server load model extrapolates to.
const modelNodes = 10000

// loadModel is the API server's load at a fleet size, extrapolated from
// one run.
type loadModel struct {
	writesPerSec, watchMBPerSec float64 // means over a warm
	etcdLiveMB, etcdWrittenMB   float64
}

// modelAt scales a run's per-node figures to nodes. Every node pulls on
// its own, so a warm takes as long at any size (the API server keeping
// up) and what nodes write grows with their number. So does what is
// watched: a NodeWarm write goes to the controller and its own agent, an
// ImageWarm status write to every agent, and the controller writes its
// progress at most once a second up to 200 agents and proportionally less
// often above (controllers/imagewarm_pace.go), so its watch bytes grow no
// faster than the number of agents watching: the model is an upper bound
// for that term.
func modelAt(r scaleResult, nodes int) loadModel {
	scale := float64(nodes) / float64(r.n)
	var writes, watch float64
	for _, v := range r.writes {
		writes += v
	}
	for _, v := range r.watchBytes {
		watch += v
	}
	secs := r.ready.Seconds()
	return loadModel{
		writesPerSec:  writes * scale / secs,
		watchMBPerSec: watch * scale / secs / 1e6,
		etcdLiveMB:    float64(r.nodeWarmBytes) * scale / 1e6,
		etcdWrittenMB: r.bodyBytes * scale / 1e6,
	}
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
