package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// footprintImages is the images per ImageWarm of the footprint benchmark.
const footprintImages = 10

// footprintWarms is how many ImageWarms the footprint benchmark creates:
// 20, the footprint target's (issue 14: 20 ImageWarms of ten images), in
// the short form and under BENCH_FULL=1 alike, or BENCH_FOOTPRINT_WARMS
// (200 shows how the footprint grows; setting up 2,000 images takes
// minutes).
func footprintWarms(b *testing.B) int {
	b.Helper()
	if v := os.Getenv("BENCH_FOOTPRINT_WARMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_FOOTPRINT_WARMS=%q is not a count", v)
		}
		return n
	}
	return 20
}

// BenchmarkAgentFootprint measures the agent binary at rest: one node, 20
// ImageWarms (BENCH_FOOTPRINT_WARMS) of ten distinct images each, every
// image already present.
// The agent is the release build (testbed.BuildPlainWarmer), run in a
// memory cgroup of its own with its binary dropped from the page cache
// first, as a new Pod would start. After the agent has reported and
// settled, it samples the process's resident memory (anonymous and
// file-backed) and CPU time over an idle period (BENCH_IDLE; 20 s, or 10
// minutes under BENCH_FULL=1), reads the cgroup's working set as the
// kubelet does, and counts the agent's API requests by method from its own
// client metrics (rest_client_requests_total).
func BenchmarkAgentFootprint(b *testing.B) {
	idle := envDuration(b, "BENCH_IDLE", 20*time.Second)
	if full() && os.Getenv("BENCH_IDLE") == "" {
		idle = 10 * time.Minute
	}
	warms := footprintWarms(b)
	cp := testbed.StartControlPlane(b)
	bin := testbed.BuildPlainWarmer(b)
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "fp"})
	ctd := testbed.StartContainerd(b, "fp-node")
	cri := ctd.ImageService(b)
	cp.CreateNode(b, "fp-node", nil)

	t0 := time.Now()
	refs := pushTiny(b, reg, warms*footprintImages)
	t1 := time.Now()
	prePull(b, cri, refs)
	b.Logf("pushed %d images in %v, pulled them in %v", len(refs), t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	for i := range warms {
		iw := build.ImageWarm("default", fmt.Sprintf("fp-%03d", i), build.Images(refs[i*footprintImages:(i+1)*footprintImages]...))
		if err := cp.Client.Create(context.Background(), iw); err != nil {
			b.Fatal(err)
		}
	}
	// BENCH_AGENT_ENV="GOGC=50 GOMEMLIMIT=24MiB" tries runtime settings:
	// the agent inherits this process's environment.
	for _, kv := range strings.Fields(os.Getenv("BENCH_AGENT_ENV")) {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	var pprofArgs []string
	pprofAddr := ""
	if os.Getenv("BENCH_PPROF") != "" {
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(b))
		pprofArgs = []string{"--pprof-bind-address", pprofAddr}
	}
	cg := agentCgroup(b, bin)
	proc, metrics := startAgentIn(b, cg, cp, bin, "fp-node", ctd, pprofArgs...)
	eventually(b, 5*time.Minute, "the NodeWarm lists every image present", func() error {
		var nw warmv1.NodeWarm
		if err := cp.Client.Get(context.Background(), types.NamespacedName{Name: "fp-node"}, &nw); err != nil {
			return err
		}
		if int(nw.Status.Present) != len(refs) {
			return fmt.Errorf("%d of %d present", nw.Status.Present, len(refs))
		}
		return nil
	})
	// Settling: start-up garbage collected (shorter in the short form).
	settle := 5 * time.Second
	if full() {
		settle = 15 * time.Second
	}
	time.Sleep(settle)

	for b.Loop() {
		nwBefore := getNodeWarm(b, cp, "fp-node")
		reqBefore := scrape(b, metrics)
		before := readProc(b, proc.Pid())
		start := time.Now()
		if pprofAddr != "" {
			// BENCH_PPROF=file: a CPU profile of the agent over the idle period.
			go saveProfile(b, pprofAddr, idle, os.Getenv("BENCH_PPROF"))
		}
		// The largest RSS, and the mean of the anonymous part over the
		// period: at rest it rises with each resync pass and falls when
		// the agent returns the freed heap (cmd/warmer memory.go), so one
		// reading at the end depends on where in that cycle it falls.
		var maxRSS, sumAnon, samples int64
		for time.Since(start) < idle {
			time.Sleep(time.Second)
			p := readProc(b, proc.Pid())
			maxRSS, sumAnon, samples = max(maxRSS, p.rss), sumAnon+p.rssAnon, samples+1
		}
		after := readProc(b, proc.Pid())
		elapsed := time.Since(start)
		reqAfter := scrape(b, metrics)
		ws := workingSet(b, cg, after)
		logIdleWrite(b, nwBefore, getNodeWarm(b, cp, "fp-node"))
		for k, v := range reqAfter {
			if (strings.HasPrefix(k, "rest_client_requests_total{") || strings.HasPrefix(k, "warmer_nodewarm_writes_total{")) && v != reqBefore[k] {
				b.Logf("agent while idle: %s +%v", k, v-reqBefore[k])
			}
		}
		b.Logf("agent RSS %.1f MiB: anonymous %.1f MiB, file-backed (the executable) %.1f MiB", mib(after.rss), mib(after.rssAnon), mib(after.rssFile))
		b.Logf("agent Go memory: heap in use %.1f MiB, heap idle %.1f MiB (released %.1f), stacks %.1f MiB, from the OS %.1f MiB",
			mib(int64(reqAfter["go_memstats_heap_inuse_bytes"])), mib(int64(reqAfter["go_memstats_heap_idle_bytes"])),
			mib(int64(reqAfter["go_memstats_heap_released_bytes"])), mib(int64(reqAfter["go_memstats_stack_inuse_bytes"])),
			mib(int64(reqAfter["go_memstats_sys_bytes"])))
		reportFootprint(b, footprint{warms: warms, rssAnon: after.rssAnon, rssFile: after.rssFile, idle: elapsed, cpu: after.cpu - before.cpu, rss: after.rss, maxRSS: maxRSS, meanAnon: sumAnon / max(samples, 1),
			ws: ws, reads: requestDelta(reqBefore, reqAfter, "GET"), writes: requestDelta(reqBefore, reqAfter, "POST", "PUT", "PATCH", "DELETE")})
	}
}

// agentCgroup makes the memory cgroup the agent runs in, so that its
// working set can be read as the kubelet reads a container's, and drops
// the freshly built binary from the page cache, so that the agent brings
// its pages in and is charged for them, as in a new Pod. Where no cgroup
// can be made it returns nil and says so: the working set is then
// estimated (workingSet).
func agentCgroup(b *testing.B, bin string) *testbed.MemoryCgroup {
	b.Helper()
	if err := testbed.EvictFromPageCache(bin); err != nil {
		b.Fatalf("dropping the agent binary from the page cache: %v", err)
	}
	cg, err := testbed.NewMemoryCgroup(b, "warmer-footprint")
	if err != nil {
		b.Logf("no memory cgroup for the agent (%v): its working set is estimated as its RSS", err)
		return nil
	}
	return cg
}

// workingSet is the agent's working set as the kubelet computes it: its
// cgroup's usage less inactive file pages. Without a cgroup, the nearest
// figure /proc gives: the resident set, which counts every mapped file
// page, active or not, and no kernel memory (an upper bound of the
// process's part, as a rule).
func workingSet(b *testing.B, cg *testbed.MemoryCgroup, p procStat) testbed.MemoryUsage {
	b.Helper()
	if cg == nil {
		return testbed.MemoryUsage{Usage: p.rss, WorkingSet: p.rss}
	}
	u, err := cg.Usage()
	if err != nil {
		b.Fatalf("reading the agent's memory cgroup: %v", err)
	}
	b.Logf("agent cgroup: usage %.1f MiB, inactive file %.1f MiB, working set %.1f MiB", mib(u.Usage), mib(u.InactiveFile), mib(u.WorkingSet))
	return u
}

func getNodeWarm(b *testing.B, cp *testbed.ControlPlane, name string) *warmv1.NodeWarm {
	b.Helper()
	var nw warmv1.NodeWarm
	if err := cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, &nw); err != nil {
		b.Fatal(err)
	}
	return &nw
}

// logIdleWrite says what a NodeWarm write during the idle period changed,
// so that a write counted there can be told apart: news (the image
// filesystem's level moved by a percent on a disk others use) or noise.
func logIdleWrite(b *testing.B, before, after *warmv1.NodeWarm) {
	b.Helper()
	if before.ResourceVersion == after.ResourceVersion {
		b.Logf("NodeWarm unchanged while idle (resourceVersion %s)", before.ResourceVersion)
		return
	}
	b.Logf("NodeWarm written while idle; image filesystem %+v -> %+v", before.Status.ImageFilesystem, after.Status.ImageFilesystem)
	before.Status.ImageFilesystem, after.Status.ImageFilesystem = nil, nil
	if !equality.Semantic.DeepEqual(before.Status, after.Status) {
		b.Logf("NodeWarm written while idle; status before %+v\nafter %+v", before.Status, after.Status)
	}
}

type footprint struct {
	warms            int
	rssAnon, rssFile int64
	idle             time.Duration
	cpu              time.Duration
	rss, maxRSS      int64
	meanAnon         int64
	ws               testbed.MemoryUsage
	reads, writes    float64
}

func reportFootprint(b *testing.B, f footprint) {
	b.Helper()
	minutes := f.idle.Minutes()
	mcores := 1000 * f.cpu.Seconds() / f.idle.Seconds()
	fmt.Fprintf(os.Stdout, "\nAgent idle %v with %d ImageWarms x %d images, all present: RSS %.1f MiB (max %.1f; anonymous %.1f, %.1f on average over the period, file-backed %.1f), working set %.1f MiB (cgroup usage %.1f less inactive files %.1f), CPU %v = %.2f millicores, API reads %.1f/min, writes %.1f/min\n\n",
		f.idle.Round(time.Second), f.warms, footprintImages, mib(f.rss), mib(f.maxRSS), mib(f.rssAnon), mib(f.meanAnon), mib(f.rssFile),
		mib(f.ws.WorkingSet), mib(f.ws.Usage), mib(f.ws.InactiveFile), f.cpu, mcores, f.reads/minutes, f.writes/minutes)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(f.maxRSS), "rss-MiB")
	b.ReportMetric(mib(f.rssAnon), "rss-anon-MiB")
	b.ReportMetric(mib(f.meanAnon), "rss-anon-mean-MiB")
	b.ReportMetric(mib(f.rssFile), "rss-file-MiB")
	b.ReportMetric(mib(f.ws.WorkingSet), "ws-MiB")
	b.ReportMetric(mcores, "millicores")
	b.ReportMetric(f.reads/minutes, "reads/min")
	b.ReportMetric(f.writes/minutes, "writes/min")
	b.ReportMetric(f.idle.Seconds(), "idle-s")
}

// requestDelta is the increase of the agent's rest_client_requests_total
// over the given methods.
func requestDelta(before, after map[string]float64, methods ...string) float64 {
	var d float64
	for _, m := range methods {
		frag := `method="` + m + `"`
		d += sumSamples(after, "rest_client_requests_total", frag) - sumSamples(before, "rest_client_requests_total", frag)
	}
	return d
}

// pushTiny pushes count distinct images that share one small random
// layer: distinct by a label in their configs, so each is its own image
// to the runtime, while the registry and containerd store and unpack the
// layer once (2,000 images with a layer each took minutes to set up).
func pushTiny(b *testing.B, reg *testbed.Registry, count int) []string {
	b.Helper()
	base := testbed.RandomImage(b, testbed.ImageOptions{LayerSize: 512})
	cf, err := base.ConfigFile()
	if err != nil {
		b.Fatal(err)
	}
	refs := make([]string, count)
	parallel(b, count, 8, func(t testbed.TB, i int) {
		cfg := *cf.Config.DeepCopy()
		cfg.Labels = map[string]string{"dev.warmer.perf/n": strconv.Itoa(i)}
		img, err := mutate.Config(base, cfg)
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = reg.Push(t, fmt.Sprintf("fp/img%04d:v1", i), img).Ref
	})
	return refs
}

// prePull pulls refs straight through CRI, a few at a time.
func prePull(b *testing.B, cri runtimeapi.ImageServiceClient, refs []string) {
	b.Helper()
	parallel(b, len(refs), 8, func(t testbed.TB, i int) {
		if _, err := cri.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: refs[i]}}); err != nil {
			t.Fatalf("pulling %s: %v", refs[i], err)
		}
	})
}

// parallel runs fn for 0..count-1 on workers goroutines; a failure in any
// fails the benchmark once they are done.
func parallel(b *testing.B, count, workers int, fn func(t testbed.TB, i int)) {
	b.Helper()
	work := make(chan int, count)
	for i := range count {
		work <- i
	}
	close(work)
	g := &goTB{TB: b}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				if g.failed() {
					return
				}
				g.run(func() { fn(g, i) })
			}
		})
	}
	wg.Wait()
	if err := g.err(); err != nil {
		b.Fatal(err)
	}
}

// goTB lets test bed helpers run on goroutines other than the
// benchmark's: Fatal records the error and ends only that call.
type goTB struct {
	testbed.TB
	mu   sync.Mutex
	errs []error
}

func (g *goTB) Fatal(args ...any) { g.fail(fmt.Sprint(args...)) }
func (g *goTB) Fatalf(format string, args ...any) {
	g.fail(fmt.Sprintf(format, args...))
}

func (g *goTB) fail(msg string) {
	g.mu.Lock()
	g.errs = append(g.errs, errors.New(msg))
	g.mu.Unlock()
	runtime.Goexit()
}

// run calls fn, which may end by Goexit through Fatal.
func (g *goTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func (g *goTB) failed() bool { return g.err() != nil }

func (g *goTB) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// saveProfile fetches a CPU profile of the given length from a pprof
// listener into path.
func saveProfile(b *testing.B, addr string, d time.Duration, path string) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
	if err != nil {
		b.Logf("profiling the agent: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil {
		b.Logf("saving the agent's profile: %v", err)
	}
}
