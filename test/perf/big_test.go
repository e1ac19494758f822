package perf

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// bigLayer is the layer size of BenchmarkWarmBigImage's image.
const bigLayer = 512 * testbed.MB

// bigSize is a large-image benchmark's image size: BENCH_BIG_GB when
// set, else def GB.
func bigSize(b *testing.B, def int64) int64 {
	b.Helper()
	if v := os.Getenv("BENCH_BIG_GB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_BIG_GB=%q is not a number of GB", v)
		}
		return int64(n) * testbed.GB
	}
	return def * testbed.GB
}

// BenchmarkWarmBigImage times warming one node with one large image
// (random data in uncompressed 512 MB layers, testbed.BigImage) through
// the whole product, as BenchmarkTimeToWarm does, against one raw CRI
// PullImage of the same image on the same runtime, taking turns going
// first, on containerd 2.x and 1.6, straight from the registry on
// loopback (no slowed link: what the runtime and the disk allow). While
// the agent warms, its resident memory (/proc) and Go heap in use (its
// /metrics) are sampled every 250 ms: their peaks against their level
// before, to show the agent's memory does not grow with the image.
//
// On CRI-O the image is one layer of at most 2 GB (crioBigSize): the
// bed's CRI-O stores images in the vfs driver, where each layer is a
// full copy of those below it.
func BenchmarkWarmBigImage(b *testing.B) {
	size := bigSize(b, 8) // the size of docs/performance.md's large-image rows
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "perf-big"})
	var img testbed.Image
	for _, v := range testbed.ContainerdVersions() {
		b.Run(fmt.Sprintf("%dGB/%s", size/testbed.GB, strings.ReplaceAll(v.Name, " ", "")), func(b *testing.B) {
			if img.Ref == "" {
				img = pushBig(b, reg, "perf/big:v1", size, bigLayer)
			}
			warmBig(b, startWarmBed(b, v.Options(b)...), img, size, bigLayer)
		})
	}
	one := crioBigSize(size)
	b.Run(fmt.Sprintf("%dGB-1layer/CRI-O", one/testbed.GB), func(b *testing.B) {
		img := pushBig(b, reg, "perf/big-one-layer:v1", one, one)
		crio := testbed.StartCRIO(b, "perf-node")
		warmBig(b, startWarmBedOn(b, crio.Name, crio.Endpoint, crio.ImageService(b)), img, one, one)
	})
}

// crioBigSize is the CRI-O case's image: the size asked for, at most 2 GB.
func crioBigSize(size int64) int64 { return min(size, 2*testbed.GB) }

// pushBig pushes a BigImage and logs how long it took.
func pushBig(b *testing.B, reg *testbed.Registry, repoTag string, size, layer int64) testbed.Image {
	b.Helper()
	pushed := time.Now()
	img := reg.Push(b, repoTag, testbed.BigImage(b, size, layer))
	b.Logf("pushed %.1f GB in %s", float64(img.Size)/testbed.GB, time.Since(pushed).Round(time.Second))
	return img
}

// warmBig runs BenchmarkWarmBigImage's rounds on one runtime.
func warmBig(b *testing.B, wb *warmBed, img testbed.Image, size, layer int64) {
	b.Helper()
	var agent, pulls, direct []time.Duration
	var mem []agentMemory
	for b.Loop() {
		var r warmRound
		paths := []func(){
			func() {
				before, cpu := scrape(b, wb.metrics), readProc(b, wb.agentProc.Pid()).cpu
				m := sampleAgentMemory(wb)
				wb.agent(b, []testbed.Image{img}, &r)
				used := m.stop()
				used.cpu = readProc(b, wb.agentProc.Pid()).cpu - cpu
				mem = append(mem, used)
				pulls = append(pulls, meanOf(before, scrape(b, wb.metrics), "warmer_image_pull_duration_seconds"))
			},
			func() { r.direct = wb.direct(b, []testbed.Image{img}, 1) },
		}
		if len(agent)%2 == 1 {
			slices.Reverse(paths)
		}
		for _, p := range paths {
			p()
		}
		agent, direct = append(agent, r.agent), append(direct, r.direct)
	}
	wb.removeAll(b, []testbed.Image{img})
	reportBig(b, size, layer, agent, pulls, direct, mem)
}

// agentMemory is the agent's memory over one warm: before it, and the
// peaks over its first and second halves, of its resident set and of
// its Go heap in use.
type agentMemory struct {
	rssBefore, heapBefore   int64
	rssPeak, heapPeak       [2]int64 // first half, second half
	samples, failedReadings int
	// cpu is the processor time the agent used over the warm, the
	// sampler's own scrapes of its metrics included: on the bed the
	// registry, containerd and the agent share two cores, so what the
	// agent uses is time the pull does not get.
	cpu time.Duration
}

// memSampler samples the agent's memory until stopped.
type memSampler struct {
	wb    *warmBed
	start time.Time
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	at    []time.Time
	rss   []int64
	heap  []int64
	m     agentMemory
}

// sampleAgentMemory reads the agent's memory now and starts sampling it.
func sampleAgentMemory(wb *warmBed) *memSampler {
	s := &memSampler{wb: wb, done: make(chan struct{})}
	s.m.rssBefore, s.m.heapBefore, _ = s.read()
	s.start = time.Now()
	s.wg.Go(func() {
		for {
			select {
			case <-s.done:
				return
			case <-time.After(memSampleEvery):
			}
			rss, heap, err := s.read()
			s.mu.Lock()
			if err != nil {
				s.m.failedReadings++
			} else {
				s.at, s.rss, s.heap = append(s.at, time.Now()), append(s.rss, rss), append(s.heap, heap)
			}
			s.mu.Unlock()
		}
	})
	return s
}

// memSampleEvery is how often the agent's memory is read: each reading
// scrapes its metrics, which costs it processor time the pull shares.
const memSampleEvery = time.Second

// read is the agent's resident set and Go heap in use.
func (s *memSampler) read() (rss, heap int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.wb.agentProc.Pid()))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	m, err := tryScrape(s.wb.metrics)
	if err != nil {
		return 0, 0, err
	}
	return rss, int64(m["go_memstats_heap_inuse_bytes"]), nil
}

// stop ends the sampling and sums it up, halves split at the midpoint of
// the time sampled.
func (s *memSampler) stop() agentMemory {
	close(s.done)
	s.wg.Wait()
	m := s.m
	m.samples = len(s.at)
	if m.samples == 0 {
		return m
	}
	half := s.start.Add(s.at[len(s.at)-1].Sub(s.start) / 2)
	for i, at := range s.at {
		h := 0
		if !at.Before(half) {
			h = 1
		}
		m.rssPeak[h] = max(m.rssPeak[h], s.rss[i])
		m.heapPeak[h] = max(m.heapPeak[h], s.heap[i])
	}
	return m
}

// reportBig prints the case's rows and reports its medians.
func reportBig(b *testing.B, size, layer int64, agent, pulls, direct []time.Duration, mem []agentMemory) {
	b.Helper()
	load, _ := os.ReadFile("/proc/loadavg")
	w := os.Stdout
	fmt.Fprintf(w, "\nWarm one %.1f GB image (%d MB layers, uncompressed), %d round(s); load average at the end: %s", float64(size)/testbed.GB, layer/testbed.MB, len(agent), load)
	fmt.Fprintf(w, "| %-44s | %9s | %9s | %9s |\n|%s|----------:|----------:|----------:|\n", "path", "median", "min", "max", strings.Repeat("-", 46))
	row := func(label string, ds []time.Duration) {
		fmt.Fprintf(w, "| %-44s | %8.2fs | %8.2fs | %8.2fs |\n", label, median(ds).Seconds(), slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
	}
	row("warmer: ImageWarm created → NodeWarm present", agent)
	row("  of which the agent's CRI pull", pulls)
	row("raw CRI PullImage", direct)
	ratio := median(agent).Seconds() / median(direct).Seconds()
	pairs := make([]string, len(agent))
	for i := range agent {
		pairs[i] = fmt.Sprintf("%.3f", agent[i].Seconds()/direct[i].Seconds())
	}
	fmt.Fprintf(w, "warmer / raw CRI: %.3f (medians); round by round: %s; the agent's CRI pull alone: %.3f\n",
		ratio, strings.Join(pairs, " "), median(pulls).Seconds()/median(direct).Seconds())
	var rssPeak, heapPeak, rssBefore, heapBefore int64
	for i, m := range mem {
		fmt.Fprintf(w, "agent, round %d (%d samples, %d failed): RSS %.1f MiB before, peak %.1f / %.1f MiB (first / second half); heap in use %.1f MiB before, peak %.1f / %.1f MiB; processor %.2fs\n",
			i+1, m.samples, m.failedReadings, mib(m.rssBefore), mib(m.rssPeak[0]), mib(m.rssPeak[1]), mib(m.heapBefore), mib(m.heapPeak[0]), mib(m.heapPeak[1]), m.cpu.Seconds())
		rssPeak, heapPeak = max(rssPeak, m.rssPeak[0], m.rssPeak[1]), max(heapPeak, m.heapPeak[0], m.heapPeak[1])
		rssBefore, heapBefore = max(rssBefore, m.rssBefore), max(heapBefore, m.heapBefore)
	}
	fmt.Fprintln(w)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(agent).Seconds(), "agent-s")
	b.ReportMetric(median(direct).Seconds(), "direct-s")
	b.ReportMetric(ratio, "agent/direct")
	b.ReportMetric(median(pulls).Seconds()/median(direct).Seconds(), "agent-pull/direct")
	b.ReportMetric(mib(rssPeak), "agent-peak-rss-MiB")
	b.ReportMetric(mib(rssPeak-rssBefore), "agent-rss-growth-MiB")
	b.ReportMetric(mib(heapPeak), "agent-peak-heap-MiB")
}

// fastPathRate is each connection's rate in BenchmarkBigImageFastPaths:
// a registry or CDN that serves one stream at a bounded speed, where
// fetching more streams at once is what the fast paths change.
const fastPathRate = 100 << 20

// BenchmarkBigImageFastPaths pulls one large image (2 GB, BENCH_BIG_GB;
// 256 MB layers) through raw CRI on containerd 2.x with its defaults and
// with the settings its transfer service offers for large images, each
// on a fresh containerd, through a proxy that gives each connection
// 100 MB/s. Not part of make bench: run it by name.
func BenchmarkBigImageFastPaths(b *testing.B) {
	size := bigSize(b, 2)
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "perf-fast"})
	img := reg.Push(b, "perf/fast:v1", testbed.BigImage(b, size, 256*testbed.MB))
	slow := faults.StartSlowProxy(b, reg.Host, fastPathRate)
	ref := strings.Replace(img.Ref, reg.Host, slow.Host, 1)
	for _, c := range []struct {
		name     string
		settings []string
	}{
		{"defaults", nil},
		{"downloads=8", []string{"max_concurrent_downloads = 8"}},
		{"fetch-buffer=1MiB", []string{"concurrent_layer_fetch_buffer = 1048576"}},
		{"unpacks=4", []string{"max_concurrent_unpacks = 4"}},
		{"all", []string{"max_concurrent_downloads = 8", "concurrent_layer_fetch_buffer = 1048576", "max_concurrent_unpacks = 4"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctd := testbed.StartContainerd(b, "fast-node", testbed.WithContainerd2(b), testbed.WithTransferSettings(c.settings...))
			cri := ctd.ImageService(b)
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := cri.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
					b.Fatalf("pulling %s: %v", ref, err)
				}
				took = append(took, time.Since(start))
				if _, err := cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
					b.Fatal(err)
				}
			}
			fmt.Fprintf(os.Stdout, "%s (%s): pulled %.1f GB in %v\n", c.name, strings.Join(c.settings, ", "), float64(size)/testbed.GB, took)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(took).Seconds(), "pull-s")
		})
	}
}
