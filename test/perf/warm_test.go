package perf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// warmParallelism is the agent's default --max-parallel-image-pulls: the
// direct CRI path pulls this many at a time too.
const warmParallelism = 3

// warmRound is one round's figures.
type warmRound struct {
	// agent is from the ImageWarm's creation to the NodeWarm listing every
	// image present, ready to the ImageWarm's Ready condition.
	agent, ready time.Duration
	// direct pulls at the agent's parallelism, wide all at once, serial
	// one at a time.
	direct, wide, serial time.Duration
	nwWrites             float64 // NodeWarm status writes the agent made for the warm
	iwWrites             float64 // ImageWarm status writes the controller made for it
}

// warmBed is one node with the real agent binary, a containerd and a
// registry, and the real controller binary, against a real API server.
type warmBed struct {
	// lastWarm is when the last warm through the agent ended; lastPath
	// when the last timed path of any kind ended.
	lastWarm, lastPath time.Time
	cp                 *testbed.ControlPlane
	cli                client.WithWatch
	cri                runtimeapi.ImageServiceClient
	node               string
	metrics            string // the agent's /metrics
	agentProc          *testbed.Process
	ctrlMetrics        string // the controller's /metrics
}

// BenchmarkTimeToWarm times warming one node through the whole product:
// an ImageWarm is created, and two clocks stop as watches deliver the
// node's NodeWarm saying every image is present and the ImageWarm's Ready
// condition (what `kubectl wait` sees). They are set beside the same pulls
// made straight through CRI all at once, at the agent's parallelism and one
// at a time (the kubelet's default). Each round of each case starts from a
// node without the images, no ImageWarm and a clean NodeWarm; the product
// and the direct paths take turns going first. -benchtime Nx gives N
// rounds.
func BenchmarkTimeToWarm(b *testing.B) {
	wb := startWarmBed(b)
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "perf"})
	cases := []struct {
		name string
		imgs []testbed.Image
	}{
		{"10x20MB", pushMany(b, reg, "ten", 10, testbed.ImageOptions{LayerSize: 20 * testbed.MB})},
		{"1x100MB", pushMany(b, reg, "big", 1, testbed.ImageOptions{LayerSize: 100 * testbed.MB})},
		{"3layers", pushMany(b, reg, "layered", 1, testbed.ImageOptions{LayerSize: 10 * testbed.MB, Layers: 3})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			// One untimed pass: the first pull of anything on a fresh
			// containerd is slower, and would fall on one path alone.
			wb.direct(b, c.imgs, warmParallelism)
			var rounds []warmRound
			for b.Loop() {
				rounds = append(rounds, wb.round(b, c.imgs, len(rounds)%2 == 1))
			}
			reportWarmRounds(b, c.name, len(c.imgs), rounds)
		})
	}
}

// round runs every path once, the product first or last.
func (wb *warmBed) round(b *testing.B, imgs []testbed.Image, productLast bool) warmRound {
	b.Helper()
	var r warmRound
	paths := []func(){
		func() { wb.agent(b, imgs, &r) },
		func() { r.direct = wb.direct(b, imgs, warmParallelism) },
	}
	if len(imgs) > warmParallelism {
		paths = append(paths, func() { r.wide = wb.direct(b, imgs, len(imgs)) })
	}
	if productLast {
		slices.Reverse(paths)
	}
	for _, path := range paths {
		path()
	}
	if len(imgs) <= warmParallelism {
		r.wide = r.direct // the same pulls: all at once
	}
	r.serial = wb.direct(b, imgs, 1)
	return r
}

func startWarmBed(b *testing.B, opts ...testbed.ContainerdOption) *warmBed {
	b.Helper()
	const node = "perf-node"
	ctd := testbed.StartContainerd(b, node, opts...)
	return startWarmBedOn(b, node, ctd.Endpoint, ctd.ImageService(b))
}

// startWarmBedOn is startWarmBed on a runtime already started for node
// (CRI-O), at its CRI endpoint.
func startWarmBedOn(b *testing.B, node, endpoint string, cri runtimeapi.ImageServiceClient) *warmBed {
	b.Helper()
	cp := testbed.StartControlPlane(b)
	bin := testbed.BuildPlainWarmer(b)
	wb := &warmBed{cp: cp, node: node, cri: cri}
	cp.CreateNode(b, wb.node, nil)
	// The agent and the controller run with their defaults: what the
	// manifests give them. BENCH_WARM_AGENT_FLAGS adds agent flags, to
	// tell what a feature costs (e.g. --yield-to-kubelet=off).
	wb.agentProc, wb.metrics = startAgentOn(b, nil, cp, bin, wb.node, endpoint, strings.Fields(os.Getenv("BENCH_WARM_AGENT_FLAGS"))...)
	wb.ctrlMetrics = startController(b, cp, bin)
	var err error
	if wb.cli, err = client.NewWithWatch(cp.Config, client.Options{Scheme: testbed.Scheme()}); err != nil {
		b.Fatal(err)
	}
	eventually(b, time.Minute, "the agent creates its NodeWarm", func() error {
		return cp.Client.Get(context.Background(), types.NamespacedName{Name: wb.node}, &warmv1.NodeWarm{})
	})
	return wb
}

// pushMany pushes count distinct random images.
func pushMany(b *testing.B, reg *testbed.Registry, prefix string, count int, o testbed.ImageOptions) []testbed.Image {
	b.Helper()
	imgs := make([]testbed.Image, count)
	for i := range imgs {
		imgs[i] = reg.PushRandom(b, fmt.Sprintf("perf/%s%d:v1", prefix, i), o)
	}
	return imgs
}

// agent times one warm through the product, from creating the ImageWarm
// to the watch events of the NodeWarm that lists every image present and
// of the ImageWarm that is Ready, into r. It counts the status writes the
// agent and the controller made for it, by their own metrics, over the
// warm and a settling second after it (a write after the result would be
// waste, and is counted), then cleans up.
func (wb *warmBed) agent(b *testing.B, imgs []testbed.Image, r *warmRound) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wb.removeAll(b, imgs)
	// A node at rest: the agent's NodeWarm token bucket (0.5 writes/s,
	// burst 5) refills the three writes a round costs (under way, done,
	// and the clean-up). Rounds faster than that drain it, and then a
	// finished result waits up to 2 s for its token: that is the bucket
	// bounding a churning agent's writes, not time to warm.
	time.Sleep(time.Until(wb.lastWarm.Add(warmRest)))
	wb.rest()
	nwBefore, iwBefore := wb.okWrites(b), wb.statusWrites(b)
	refs := make([]string, len(imgs))
	for i, img := range imgs {
		refs[i] = img.Ref
	}
	iw := build.ImageWarm("default", "perf", build.Images(refs...))
	w := wb.watchWarm(ctx, b, iw)
	start := time.Now()
	if err := wb.cp.Client.Create(ctx, iw); err != nil {
		b.Fatal(err)
	}
	present, ready, err := w.wait(len(imgs))
	if err != nil {
		b.Fatal(err)
	}
	r.agent, r.ready = present.Sub(start), ready.Sub(start)
	time.Sleep(time.Second)
	r.nwWrites, r.iwWrites = wb.okWrites(b)-nwBefore, wb.statusWrites(b)-iwBefore
	if err := wb.cp.Client.Delete(ctx, iw); err != nil {
		b.Fatal(err)
	}
	wb.waitClean(b)
	wb.lastWarm, wb.lastPath = time.Now(), time.Now()
}

// warmRest is the least time between two warms through the agent: three
// writes at the agent's default 0.5 writes/s.
const warmRest = 6 * time.Second

// pathRest is the pause before every timed path. Every path must start
// from the same state: the agent's had to wait for its token bucket,
// and a first pull after seconds of idleness came out 0.1-0.2 s slower
// on this VM than one straight after other pulls, which favoured the
// direct path.
const pathRest = 3 * time.Second

// rest waits until pathRest has passed since the last timed path.
func (wb *warmBed) rest() { time.Sleep(time.Until(wb.lastPath.Add(pathRest))) }

// waitClean waits for the ImageWarm to be gone and the NodeWarm to want
// nothing.
func (wb *warmBed) waitClean(b *testing.B) {
	b.Helper()
	eventually(b, time.Minute, "a clean NodeWarm", func() error {
		ctx := context.Background()
		err := wb.cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "perf"}, &warmv1.ImageWarm{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ImageWarm still there (%w)", err)
		}
		var nw warmv1.NodeWarm
		if err := wb.cp.Client.Get(ctx, types.NamespacedName{Name: wb.node}, &nw); err != nil {
			return err
		}
		if nw.Status.Desired != 0 {
			return fmt.Errorf("NodeWarm still wants %d images", nw.Status.Desired)
		}
		return nil
	})
}

// okWrites is the agent's count of NodeWarm status writes that succeeded.
func (wb *warmBed) okWrites(b *testing.B) float64 {
	b.Helper()
	return sumSamples(scrape(b, wb.metrics), "warmer_nodewarm_writes_total", `result="ok"`)
}

// statusWrites is the controller's count of ImageWarm status writes that
// succeeded.
func (wb *warmBed) statusWrites(b *testing.B) float64 {
	b.Helper()
	return sumSamples(scrape(b, wb.ctrlMetrics), "warmer_imagewarm_status_writes_total", `result="written"`)
}

// direct times plain CRI PullImage calls, parallel at a time, from a
// runtime without the images, and checks they are all there afterwards.
func (wb *warmBed) direct(b *testing.B, imgs []testbed.Image, parallel int) time.Duration {
	b.Helper()
	wb.removeAll(b, imgs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	defer func() { wb.lastPath = time.Now() }()
	wb.rest()
	refs := make(chan string, len(imgs))
	for _, img := range imgs {
		refs <- img.Ref
	}
	close(refs)
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	start := time.Now()
	for w := range parallel {
		wg.Go(func() {
			for ref := range refs {
				if _, err := wb.cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
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
	for _, img := range imgs {
		resp, err := wb.cri.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Ref}})
		if err != nil || resp.Image == nil {
			b.Fatalf("%s missing after the direct pulls (%v)", img.Ref, err)
		}
	}
	return elapsed
}

// removeAll removes the images through CRI; containerd deletes content
// and snapshots before it answers.
func (wb *warmBed) removeAll(b *testing.B, imgs []testbed.Image) {
	b.Helper()
	for _, img := range imgs {
		if _, err := wb.cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Ref}}); err != nil {
			b.Fatalf("removing %s: %v", img.Ref, err)
		}
	}
}
