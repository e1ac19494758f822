package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
)

// scaleImages is how many images the fleet's one ImageWarm lists.
const scaleImages = 10

// scalePullLatency is each fake pull's duration: about a 20 MB image's
// pull on this machine's containerd (docs/performance.md).
const scalePullLatency = 150 * time.Millisecond

// fleetSizes are the N the scale benchmark runs: BENCH_SCALE (comma
// separated), else 100, 300 and 1000 under BENCH_FULL=1, else 100.
func fleetSizes(b *testing.B) []int {
	b.Helper()
	spec := os.Getenv("BENCH_SCALE")
	if spec == "" {
		spec = "100"
		if full() {
			spec = "100,300,1000"
		}
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("BENCH_SCALE=%q: %q is not a fleet size", spec, f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkScale runs N simulated agents (the real agent code, fake
// runtimes; see test/scale) and the real controller binary against one
// API server, then times one ImageWarm of ten images over all N nodes
// from creation to Ready, and counts what it cost the API server, from
// its own apiserver_request_total scraped before and after.
func BenchmarkScale(b *testing.B) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel))) // errors only; agents' chatter would drown the table
	// A thousand agents in one process hold a thousand connections and
	// more at times; root may raise the open-file limit.
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Logf("raising the open-file limit: %v", err)
	}
	for _, n := range fleetSizes(b) {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for b.Loop() {
				runScale(b, n)
			}
		})
	}
}

// scaleResult is what one fleet run measured.
type scaleResult struct {
	n                   int
	pulled, ready       time.Duration
	writes              map[string]float64 // by resource[/subresource]
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
}

func runScale(b *testing.B, n int) {
	cp := testbed.StartControlPlane(b)
	ctx := context.Background()
	agentCfg, agentKubeconfig := serviceAccountUser(b, cp, "warmer-agent")
	ctrlCfg, ctrlKubeconfig := serviceAccountUser(b, cp, "warmer-controller")
	_ = ctrlCfg
	createNodes(b, cp, n)

	ctrlArgs := []string{testbed.BuildPlainWarmer(b), "controller", "--kubeconfig", ctrlKubeconfig,
		"--leader-election-namespace", "default", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	ctrlProc := testbed.StartProcess(b, "controller", ctrlArgs...)
	_ = agentKubeconfig
	// A real agent has no client-side rate limit (see cmd/warmer): the
	// server's priority and fairness is what holds back a fleet.
	agentCfg.QPS, agentCfg.Burst = -1, 0
	// Each agent its own connection, as from its own Pod: client-go
	// otherwise shares one transport between equal configs, and a
	// thousand agents' watches and writes over a few shared HTTP/2
	// connections overflowed their streams into bursts of new
	// connections (over 20,000 open files at once).
	agentCfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	// BENCH_SCALE_NO_EVENTS=1: agents without events, an experiment to
	// tell what events cost (docs/performance.md).
	fleet, err := scale.Start(scale.Options{Config: agentCfg, Scheme: testbed.Scheme(), PullLatency: scalePullLatency,
		NoEvents: os.Getenv("BENCH_SCALE_NO_EVENTS") == "1"}, names)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := fleet.Stop(); err != nil {
			b.Logf("simulated agents: %v", err)
		}
	})
	waitNodeWarms(b, cp, n)
	time.Sleep(3 * time.Second) // let start-up traffic settle out of the window

	before := apiMetrics(b, cp.Config)
	ctrlBefore, simBefore := readProc(b, ctrlProc.Pid()), readProc(b, os.Getpid())
	refs := make([]string, scaleImages)
	for i := range refs {
		refs[i] = fmt.Sprintf("127.0.0.1:5000/scale/app%d:v1", i)
	}
	iw := testbed.NewWarm("default", "fleet", nil, refs...)
	start := time.Now()
	if err := cp.Client.Create(ctx, iw); err != nil {
		b.Fatal(err)
	}
	r := scaleResult{n: n}
	var once sync.Once
	lastLog := time.Now()
	deadline := start.Add(10 * time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("ImageWarm not Ready on %d nodes within 10 minutes: %+v", n, iw.Status.Nodes)
		}
		if r.pulled == 0 && allPulled(fleet, len(refs)) {
			once.Do(func() { r.pulled = time.Since(start) })
		}
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, iw); err != nil {
			b.Fatal(err)
		}
		if meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) && int(iw.Status.Nodes.Ready) == n {
			r.ready = time.Since(start)
			break
		}
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
		time.Sleep(100 * time.Millisecond)
	}
	// Trailing writes (a last status, events in flight) belong to the warm.
	time.Sleep(5 * time.Second)
	after := apiMetrics(b, cp.Config)
	r.window = time.Since(start)
	ctrlAfter, simAfter := readProc(b, ctrlProc.Pid()), readProc(b, os.Getpid())
	r.ctrlCPU, r.ctrlRSS, r.ctrlPeak = ctrlAfter.cpu-ctrlBefore.cpu, ctrlAfter.rss, peakRSS(b, ctrlProc.Pid())
	r.simCPU, r.simRSS = simAfter.cpu-simBefore.cpu, simAfter.rss
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		r.simFDs = len(fds)
	}
	r.writes = writesByResource(before, after)
	r.nodeWarmWritesTotal = r.writes["nodewarms"] + r.writes["nodewarms/status"]
	r.throttled = sumSamples(after, "apiserver_request_total", `code="429"`) - sumSamples(before, "apiserver_request_total", `code="429"`)
	r.rejected = sumSamples(after, "apiserver_flowcontrol_rejected_requests_total") - sumSamples(before, "apiserver_flowcontrol_rejected_requests_total")
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, iw); err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(iw.Status)
	r.statusBytes = len(raw)
	reportScale(b, r)
}

func nodeName(i int) string { return fmt.Sprintf("sim-%04d", i) }

// serviceAccountUser makes a user the API server takes for a service
// account of warmer-system (so priority and fairness put it where a real
// agent's or controller's requests go: the service-accounts flow schema,
// workload-low), bound to cluster-admin, and returns its config and a
// kubeconfig file.
func serviceAccountUser(b *testing.B, cp *testbed.ControlPlane, sa string) (*rest.Config, string) {
	b.Helper()
	name := "system:serviceaccount:warmer-system:" + sa
	cfg := cp.AddUser(b, name, "system:serviceaccounts", "system:serviceaccounts:warmer-system", "system:authenticated")
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "perf-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	if err := cp.Client.Create(context.Background(), crb); err != nil {
		b.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := fmt.Sprintf("%s/%s.kubeconfig", b.TempDir(), sa)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return cfg, path
}

// createNodes registers n Node objects, as n kubelets would.
func createNodes(b *testing.B, cp *testbed.ControlPlane, n int) {
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
func waitNodeWarms(b *testing.B, cp *testbed.ControlPlane, n int) {
	b.Helper()
	eventually(b, 10*time.Minute, fmt.Sprintf("%d agents report", n), func() error {
		var list warmv1.NodeWarmList
		if err := cp.Client.List(context.Background(), &list); err != nil {
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

// allPulled says whether every fake runtime holds count images.
func allPulled(f *scale.Fleet, count int) bool {
	for _, rt := range f.Runtimes {
		if imgs, _ := rt.ListImages(context.Background()); len(imgs) < count {
			return false
		}
	}
	return true
}

// writesByResource is the increase of apiserver_request_total for
// mutating verbs answered with success, by resource (and subresource):
// the writes that happened. Requests turned away (429) are counted apart.
func writesByResource(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		verb := label(k, "verb")
		if verb != "POST" && verb != "PUT" && verb != "PATCH" && verb != "DELETE" && verb != "APPLY" {
			continue
		}
		if !strings.HasPrefix(label(k, "code"), "2") {
			continue
		}
		res := label(k, "resource")
		if sub := label(k, "subresource"); sub != "" {
			res += "/" + sub
		}
		if d := v - before[k]; d > 0 {
			out[res] += d
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
	var total float64
	keys := make([]string, 0, len(r.writes))
	for k, v := range r.writes {
		total += v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := os.Stdout
	fmt.Fprintf(w, "\nFleet of %d simulated agents, one ImageWarm of %d images (fake pulls of %v)\n", r.n, scaleImages, scalePullLatency)
	fmt.Fprintf(w, "all pulled %.1fs, ImageWarm Ready %.1fs; status %d bytes; window %.0fs\n", r.pulled.Seconds(), r.ready.Seconds(), r.statusBytes, r.window.Seconds())
	fmt.Fprintf(w, "API server: %.0f answers 429, %.0f requests rejected by priority and fairness\n", r.throttled, r.rejected)
	if r.ctrlRestarts > 0 {
		fmt.Fprintf(w, "the controller lost its lease and was restarted %d time(s)\n", r.ctrlRestarts)
	}
	fmt.Fprintf(w, "controller: CPU %.2fs (%.0f millicores over the window), RSS %.0f MiB (peak %.0f MiB); simulation process: CPU %.1fs, RSS %.0f MiB, %d open files\n",
		r.ctrlCPU.Seconds(), 1000*r.ctrlCPU.Seconds()/r.window.Seconds(), mib(r.ctrlRSS), mib(r.ctrlPeak), r.simCPU.Seconds(), mib(r.simRSS), r.simFDs)
	fmt.Fprintf(w, "| %-28s | %8s | %9s |\n|------------------------------|---------:|----------:|\n", "writes (resource)", "total", "per node")
	for _, k := range keys {
		fmt.Fprintf(w, "| %-28s | %8.0f | %9.2f |\n", k, r.writes[k], r.writes[k]/float64(r.n))
	}
	fmt.Fprintf(w, "| %-28s | %8.0f | %9.2f |\n\n", "all", total, total/float64(r.n))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.ready.Seconds(), "ready-s")
	b.ReportMetric(r.pulled.Seconds(), "pulled-s")
	b.ReportMetric(total, "api-writes")
	b.ReportMetric(r.nodeWarmWritesTotal/float64(r.n), "nw-writes/node")
	b.ReportMetric(total/float64(r.n), "writes/node")
	b.ReportMetric(float64(r.statusBytes), "status-B")
	b.ReportMetric(r.ctrlCPU.Seconds(), "ctrl-cpu-s")
	b.ReportMetric(mib(r.ctrlPeak), "ctrl-peak-MiB")
	b.ReportMetric(float64(r.ctrlRestarts), "ctrl-restarts")
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
