package pullengine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
)

// Shape of the warm-up the benchmark times: what docs/performance.md
// reports.
const (
	benchImages      = 10
	benchImageSize   = 20 * testbed.MB
	benchParallelism = 3
)

// benchWidths are the engine's MaxParallelPulls the benchmark sets side
// by side with SerializePulls: one, the agent's default
// (benchParallelism) and all ten at once.
var benchWidths = []int{1, benchParallelism, benchImages}

// benchRound is one round's wall times; wide is by MaxParallelPulls.
type benchRound struct {
	direct, engine, serial time.Duration
	wide                   map[int]time.Duration
}

// BenchmarkWarm warms ten distinct 20 MB images on an emptied containerd
// per round: through the engine with MaxParallelPulls 3 (the agent's
// default) against direct CRI PullImage calls from three goroutines, then
// through the engine with MaxParallelPulls 1 and 10 and with
// SerializePulls (the kubelet's default), so the parallelism default is
// chosen from figures side by side. Each round is one b.Loop iteration,
// so -benchtime=5x gives five rounds and the default gives one. It prints
// a table of medians and reports them as metrics.
//
//	go test -run '^$' -bench BenchmarkWarm -benchtime 5x ./pkg/pullengine
func BenchmarkWarm(b *testing.B) {
	skipShort(b)
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "bench"})
	imgs := pushDistinct(b, reg, benchImages, benchImageSize)
	n := startNode(b, "node-b")
	direct := n.ctd.ImageService(b)
	// One untimed pass first: the first warm-up on a new containerd is
	// slower (measured: by up to a third), and whichever path went first
	// in round one would carry that alone.
	timeDirect(b, n, direct, imgs)

	var rounds []benchRound
	for b.Loop() {
		r := benchRound{wide: map[int]time.Duration{}}
		// The engine and direct calls take turns going first, so that
		// neither always runs on a machine the other has just warmed up.
		if len(rounds)%2 == 0 {
			r.engine = timeEngine(b, n, imgs, pullengine.Options{MaxParallelPulls: benchParallelism})
			r.direct = timeDirect(b, n, direct, imgs)
		} else {
			r.direct = timeDirect(b, n, direct, imgs)
			r.engine = timeEngine(b, n, imgs, pullengine.Options{MaxParallelPulls: benchParallelism})
		}
		r.wide[benchParallelism] = r.engine
		for _, w := range benchWidths {
			if w != benchParallelism {
				r.wide[w] = timeEngine(b, n, imgs, pullengine.Options{MaxParallelPulls: w})
			}
		}
		r.serial = timeEngine(b, n, imgs, pullengine.Options{SerializePulls: true})
		rounds = append(rounds, r)
	}
	reportWarm(b, os.Stdout, n, rounds)
}

// timeEngine empties the runtime, then times a fresh engine from Sync to
// the last result. The engine is started before the clock does: starting
// it is the agent's business, once. Its disk guard is off (testOptions):
// the host's disk is shared, and a fill above 80 % held every pull back
// here once, which is the guard's job but not what this measures.
func timeEngine(b *testing.B, n *node, imgs []testbed.Image, opts pullengine.Options) time.Duration {
	b.Helper()
	n.removeAll(b)
	e := startEngine(b, n.cri, testOptions(opts))
	defer e.stop(b)
	start := time.Now()
	for _, st := range e.Sync(e.ctx, requests(imgs)) {
		// An image refused at once (a bad reference, disk pressure) would
		// never finish: say why now rather than time out.
		if st.Last != nil && !st.Last.Succeeded() {
			b.Fatalf("engine refused %s: %s: %s", st.Image, st.Last.Class, st.Last.Message)
		}
	}
	for range imgs {
		if res := e.result(b); !res.Succeeded() {
			b.Fatalf("engine pull of %s: %s: %s", res.Image, res.Class, res.Message)
		}
	}
	elapsed := time.Since(start)
	checkAllListed(b, n, imgs)
	return elapsed
}

// timeDirect empties the runtime, then times plain CRI PullImage calls,
// benchParallelism at a time, over the raw gRPC client: the floor the
// engine is measured against.
func timeDirect(b *testing.B, n *node, cri runtimeapi.ImageServiceClient, imgs []testbed.Image) time.Duration {
	b.Helper()
	n.removeAll(b)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	refs := make(chan string, len(imgs))
	for _, img := range imgs {
		refs <- img.Ref
	}
	close(refs)
	var wg sync.WaitGroup
	errs := make([]error, benchParallelism)
	start := time.Now()
	for w := range benchParallelism {
		wg.Go(func() {
			for ref := range refs {
				if _, err := cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
					errs[w] = errors.Join(errs[w], err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("direct pulls: %v", err)
	}
	checkAllListed(b, n, imgs)
	return elapsed
}

// checkAllListed makes sure a timed warm-up really left every image in the
// runtime: a fast run that pulled nothing must not pass for a result.
func checkAllListed(b *testing.B, n *node, imgs []testbed.Image) {
	b.Helper()
	for _, img := range imgs {
		if !n.listed(b, img.Ref) {
			b.Fatalf("%s not listed after the warm-up", img.Ref)
		}
	}
}

// reportWarm prints the table and reports the medians as metrics; the
// round time b.Loop measured (removals included) is suppressed as
// meaningless.
func reportWarm(b *testing.B, w io.Writer, n *node, rounds []benchRound) {
	b.Helper()
	pick := func(f func(benchRound) time.Duration) []time.Duration {
		out := make([]time.Duration, len(rounds))
		for i, r := range rounds {
			out[i] = f(r)
		}
		return out
	}
	direct := pick(func(r benchRound) time.Duration { return r.direct })
	eng := pick(func(r benchRound) time.Duration { return r.engine })
	serial := pick(func(r benchRound) time.Duration { return r.serial })
	ratios := make([]float64, len(rounds))
	for i, r := range rounds {
		ratios[i] = r.engine.Seconds() / r.direct.Seconds()
	}
	ratio := median(eng).Seconds() / median(direct).Seconds()

	v := n.cri.RuntimeVersion()
	fmt.Fprintf(w, "\nWarm %d distinct %d MB images, emptied containerd each time; %d round(s); %d CPUs; %s %s, snapshotter %s\n",
		benchImages, benchImageSize/testbed.MB, len(rounds), runtime.NumCPU(), v.GetRuntimeName(), v.GetRuntimeVersion(), snapshotterOf(b, n))
	fmt.Fprintf(w, "| %-29s | %8s | %8s | %8s |\n|%s|%s|%s|%s|\n", "path", "median", "min", "max",
		"-------------------------------", "---------:", "---------:", "---------:")
	row := func(name string, ds []time.Duration) {
		fmt.Fprintf(w, "| %-29s | %7.3fs | %7.3fs | %7.3fs |\n", name, median(ds).Seconds(), slices.Min(ds).Seconds(), slices.Max(ds).Seconds())
	}
	row(fmt.Sprintf("direct CRI, %d in parallel", benchParallelism), direct)
	for _, width := range benchWidths {
		row(fmt.Sprintf("engine, MaxParallelPulls %d", width), pick(func(r benchRound) time.Duration { return r.wide[width] }))
	}
	row("engine, SerializePulls", serial)
	fmt.Fprintf(w, "engine/direct: %.3f (ratio of medians; per round %.3f to %.3f); serial/engine: %.2f\n\n",
		ratio, slices.Min(ratios), slices.Max(ratios), median(serial).Seconds()/median(eng).Seconds())

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(direct).Seconds(), "direct-s")
	b.ReportMetric(median(eng).Seconds(), "engine-s")
	b.ReportMetric(median(serial).Seconds(), "serial-s")
	for _, width := range benchWidths {
		b.ReportMetric(median(pick(func(r benchRound) time.Duration { return r.wide[width] })).Seconds(), fmt.Sprintf("parallel-%d-s", width))
	}
	b.ReportMetric(ratio, "engine/direct")
}

// snapshotterOf asks containerd's CRI which snapshotter it unpacks into,
// from its verbose Status: overlayfs and native differ a lot in speed.
func snapshotterOf(b *testing.B, n *node) string {
	b.Helper()
	conn, err := grpc.NewClient("unix://"+n.ctd.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "unknown"
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return "unknown"
	}
	var cfg struct {
		Containerd struct {
			Snapshotter string `json:"snapshotter"`
		} `json:"containerd"`
	}
	if json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg) != nil || cfg.Containerd.Snapshotter == "" {
		return "unknown"
	}
	return cfg.Containerd.Snapshotter
}

// median is the middle value (the mean of the middle two for an even
// count) of ds, which must not be empty.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}
