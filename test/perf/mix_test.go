package perf

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// mixLink is the node's link in BenchmarkWarmBigAndSmall, shared by every
// pull as a node's network is: three 1 GB images take about half a minute.
const mixLink = 100 << 20

// mixSmall is the small image's one layer: a sidecar's size.
const mixSmall = 50 * testbed.MB

// mixBigSize is each large image's size: 1 GB, 2 GB under BENCH_FULL=1
// (three of them, in the registry and on the node, content and snapshots:
// about 18 GB of disk).
func mixBigSize() int64 {
	if full() {
		return 2 * testbed.GB
	}
	return testbed.GB
}

// mixTurn is one warm of the large images, with or without the small one.
type mixTurn struct {
	big    time.Duration // ImageWarm created → the last large image present
	small  time.Duration // small ImageWarm created → small image present
	pauses float64       // large pulls the agent paused for a smaller one
}

// BenchmarkWarmBigAndSmall measures the agent's pull slots under a mix of
// big and small images (issue 34): three large images (random data,
// testbed.BigImage) warmed through the agent binary with its default three
// slots over one shared link of 100 MB/s, and, once a quarter of their
// bytes has crossed the link, a 50 MB image asked for by a second
// ImageWarm. It reports the small image's time to present and the large
// pulls' total time with the small image against without it, the two
// turns taking turns going first in every round, on containerd 1.6 and
// 2.x. Presence is read from the runtime (CRI ImageStatus every 50 ms),
// not from the NodeWarm, whose writes are paced.
func BenchmarkWarmBigAndSmall(b *testing.B) {
	size := mixBigSize()
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "perf-mix"})
	link := faults.StartLinkProxy(b, reg.Host, mixLink)
	viaLink := func(img testbed.Image) testbed.Image {
		img.Ref = strings.Replace(img.Ref, reg.Host, link.Host, 1)
		return img
	}
	pushed := time.Now()
	var big []testbed.Image
	for i := range warmParallelism {
		big = append(big, viaLink(reg.Push(b, fmt.Sprintf("perf/mixbig%d:v1", i), testbed.BigImage(b, size, bigLayer))))
	}
	small := viaLink(reg.PushRandom(b, "perf/mixsmall:v1", testbed.ImageOptions{LayerSize: mixSmall}))
	b.Logf("pushed %d × %.1f GB and %d MB in %s", len(big), float64(size)/testbed.GB, mixSmall/testbed.MB, time.Since(pushed).Round(time.Second))
	for _, v := range testbed.ContainerdVersions() {
		b.Run(fmt.Sprintf("3x%dGB+50MB/%s", size/testbed.GB, strings.ReplaceAll(v.Name, " ", "")), func(b *testing.B) {
			wb := startWarmBed(b, v.Options(b)...)
			var with, without []mixTurn
			for b.Loop() {
				turns := []func(){
					func() { with = append(with, wb.mixTurn(b, link, big, &small)) },
					func() { without = append(without, wb.mixTurn(b, link, big, nil)) },
				}
				if len(with)%2 == 1 {
					slices.Reverse(turns)
				}
				for _, t := range turns {
					t()
				}
			}
			wb.removeAll(b, append(slices.Clone(big), small))
			reportMix(b, size, with, without)
		})
	}
}

// mixTurn warms the large images through the agent from a node without
// them, and the small one too if not nil, asked for once a quarter of the
// large images' bytes has crossed the link; then cleans up.
func (wb *warmBed) mixTurn(b *testing.B, link *faults.SlowProxy, big []testbed.Image, small *testbed.Image) mixTurn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	all := slices.Clone(big)
	if small != nil {
		all = append(all, *small)
	}
	wb.removeAll(b, all)
	time.Sleep(time.Until(wb.lastWarm.Add(warmRest)))
	wb.rest()
	pausesBefore := wb.sizePauses(b)
	present := wb.watchPresent(ctx, all)
	var refs []string
	var bigBytes int64
	for _, img := range big {
		refs, bigBytes = append(refs, img.Ref), bigBytes+img.Size
	}
	warm := build.ImageWarm("default", "perf", build.Images(refs...))
	sent := link.Sent()
	start := time.Now()
	if err := wb.cp.Client.Create(ctx, warm); err != nil {
		b.Fatal(err)
	}
	var asked time.Time
	if small != nil {
		eventually(b, 5*time.Minute, "a quarter of the large images' bytes across the link", func() error {
			if n := link.Sent() - sent; n < bigBytes/4 {
				return fmt.Errorf("%d of %d bytes", n, bigBytes)
			}
			return nil
		})
		asked = time.Now()
		if err := wb.cp.Client.Create(ctx, build.ImageWarm("default", "perf-small", build.Images(small.Ref))); err != nil {
			b.Fatal(err)
		}
	}
	at := <-present
	if at == nil {
		b.Fatalf("the images not present within 10 minutes:\n%s", wb.agentProc.Log(40))
	}
	var t mixTurn
	for _, img := range big {
		t.big = max(t.big, at[img.Ref].Sub(start))
	}
	if small != nil {
		t.small = at[small.Ref].Sub(asked)
	}
	t.pauses = wb.sizePauses(b) - pausesBefore
	wb.deleteWarms(ctx, b, small != nil)
	return t
}

// watchPresent polls the runtime every 50 ms for the images and sends
// when each was first present, or nil if ctx ends first.
func (wb *warmBed) watchPresent(ctx context.Context, imgs []testbed.Image) <-chan map[string]time.Time {
	out := make(chan map[string]time.Time, 1)
	go func() {
		at := map[string]time.Time{}
		for len(at) < len(imgs) {
			for _, img := range imgs {
				if _, ok := at[img.Ref]; ok {
					continue
				}
				resp, err := wb.cri.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Ref}})
				if err == nil && resp.Image != nil {
					at[img.Ref] = time.Now()
				}
			}
			select {
			case <-ctx.Done():
				out <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		out <- at
	}()
	return out
}

// sizePauses is the agent's count of large pulls paused for a smaller
// image's.
func (wb *warmBed) sizePauses(b *testing.B) float64 {
	b.Helper()
	return sumSamples(scrape(b, wb.metrics), "warmer_image_pull_size_pauses_total")
}

// deleteWarms deletes the turn's ImageWarms and waits for a clean
// NodeWarm.
func (wb *warmBed) deleteWarms(ctx context.Context, b *testing.B, small bool) {
	b.Helper()
	names := []string{"perf"}
	if small {
		names = append(names, "perf-small")
	}
	for _, name := range names {
		if err := wb.cp.Client.Delete(ctx, build.ImageWarm("default", name)); err != nil {
			b.Fatal(err)
		}
	}
	wb.waitClean(b)
	wb.lastWarm, wb.lastPath = time.Now(), time.Now()
}

// reportMix prints the case's rows and reports its medians.
func reportMix(b *testing.B, size int64, with, without []mixTurn) {
	b.Helper()
	pick := func(ts []mixTurn, f func(mixTurn) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ts))
		for i, t := range ts {
			out[i] = f(t)
		}
		return out
	}
	bigWith := pick(with, func(t mixTurn) time.Duration { return t.big })
	bigWithout := pick(without, func(t mixTurn) time.Duration { return t.big })
	small := pick(with, func(t mixTurn) time.Duration { return t.small })
	var pauses []float64
	for _, t := range with {
		pauses = append(pauses, t.pauses)
	}
	ratio := median(bigWith).Seconds() / median(bigWithout).Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	w := os.Stdout
	fmt.Fprintf(w, "\nThree %.1f GB images and a %d MB one over one %d MB/s link, %d round(s); load average at the end: %s",
		float64(size)/testbed.GB, mixSmall/testbed.MB, mixLink>>20, len(with), load)
	fmt.Fprintf(w, "| %-50s | %9s | %9s | %9s |\n|%s|----------:|----------:|----------:|\n", "clock", "median", "min", "max", strings.Repeat("-", 52))
	row := func(label string, ds []time.Duration) {
		fmt.Fprintf(w, "| %-50s | %8.2fs | %8.2fs | %8.2fs |\n", label, median(ds).Seconds(), slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
	}
	row("large: ImageWarm created → last present, alone", bigWithout)
	row("large: the same, with the small image", bigWith)
	row("small: its ImageWarm created → present", small)
	for i := range with {
		fmt.Fprintf(w, "round %d (%s first): large alone %.2fs, with the small image %.2fs; small %.2fs, %v large pull(s) paused for it\n",
			i+1, []string{"with the small image", "alone"}[i%2], without[i].big.Seconds(), with[i].big.Seconds(), with[i].small.Seconds(), with[i].pauses)
	}
	fmt.Fprintf(w, "large with / without the small image: %.3f; large pulls paused for it per turn: %v\n\n", ratio, pauses)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(small).Seconds(), "small-s")
	b.ReportMetric(median(bigWithout).Seconds(), "big-alone-s")
	b.ReportMetric(median(bigWith).Seconds(), "big-with-small-s")
	b.ReportMetric(ratio, "big-with/alone")
	b.ReportMetric(median(pauses), "pauses/turn")
}
