package pullengine_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// bigPace is each large pull's link: a 300 MB image of three layers takes close to a minute.
const bigPace = 2 << 20

// smallWithin is how soon the small image must be in beside the large
// pulls: seconds, not the minute they take.
const smallWithin = 15 * time.Second

// TestBigDoesNotBlockSmall holds every slot with pulls of three 300 MB
// images on a slow link, then asks for a 5 MB image: it must be in within
// seconds, the large pulls still under way, the one paused for it
// resuming from the bytes it had, not from zero. On containerd 1.6 and
// 2.x.
func TestBigDoesNotBlockSmall(t *testing.T) {
	skipShort(t)
	for _, v := range testbed.ContainerdVersions() {
		t.Run(v.Name, func(t *testing.T) { testBigDoesNotBlockSmall(t, v.Options(t)) })
	}
}

func testBigDoesNotBlockSmall(t *testing.T, opts []testbed.ContainerdOption) {
	const slots = 3
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "big"})
	slow := faults.StartSlowProxy(t, reg.Host, bigPace)
	var big []string
	for i := range slots {
		img := reg.PushRandom(t, fmt.Sprintf("ai/big%d:v1", i), testbed.ImageOptions{LayerSize: 100 * testbed.MB, Layers: 3})
		big = append(big, strings.Replace(img.Ref, reg.Host, slow.Host, 1))
	}
	small := reg.PushRandom(t, "app/sidecar:v1", testbed.ImageOptions{LayerSize: 5 * testbed.MB}).Ref

	n := startNode(t, "node-big", opts...)
	store, err := n.cri.ContentStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	e := startEngine(t, n.cri, pullengine.Options{Content: store, MaxParallelPulls: slots,
		LargePullBytes: largeBytes(), StallTimeout: pullengine.DefaultStallTimeout, Registerer: metrics})
	for _, b := range big {
		if st := e.Enqueue(e.ctx, pullengine.Request{Image: b}); st.State != pull.StateQueued {
			t.Fatalf("Enqueue(%s) = %+v", b, st)
		}
	}
	// One far enough in that, started again from zero, it would show
	// less at its first reading. (On containerd 2 the others may wait in
	// the runtime: its download limit is the node's.)
	before := fetching(t, e, big, 24*testbed.MB)

	paused := askSmall(t, e, n, small)
	if len(paused) == 0 {
		t.Fatal("no large pull was paused")
	}
	for _, p := range paused {
		resumed := resumedAt(t, e, p)
		if resumed < before[p] {
			t.Errorf("%s resumed at %d bytes, had %d before its pause: started again from zero", p, resumed, before[p])
		}
		t.Logf("%s paused with at least %d bytes in, resumed at %d", p, before[p], resumed)
	}
	if p := counter(t, metrics, "warmer_image_pull_size_pauses_total"); p != float64(len(paused)) {
		t.Errorf("size pauses counted %v, want %d", p, len(paused))
	}
}

// pausedForSmall collects results until small's pull succeeded, and
// returns the images whose pulls were paused for it meanwhile; any other
// result fails the test.
func pausedForSmall(t *testing.T, e *engine, small string) []string {
	t.Helper()
	var paused []string
	for pulled := false; !pulled; {
		switch r := e.result(t); {
		case r.Image == small && r.Succeeded():
			pulled = true
		case r.Class == pull.ClassCanceled && strings.Contains(r.Message, "smaller image"):
			paused = append(paused, r.Image)
		default:
			t.Errorf("result %+v, want the small one pulled and large ones paused", r)
		}
	}
	return paused
}

// largeBytes is the size from which the test's pulls are large; the
// environment's WARMER_TEST_LARGE_PULL_BYTES=-1 turns the cure off, to see
// the test fail without it.
func largeBytes() int64 {
	if os.Getenv("WARMER_TEST_LARGE_PULL_BYTES") == "-1" {
		return -1
	}
	return 100 * testbed.MB
}

// fetching waits until every one of images is pulling with its size
// known, one with min bytes in, and returns what each had then.
func fetching(t *testing.T, e *engine, images []string, min int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	testbed.Eventually(t, waitLimit, "the large pulls fetching", func() error {
		most := int64(0)
		for _, img := range images {
			s, _ := e.Status(img)
			if s.State != pull.StatePulling || s.Progress == nil || !s.Progress.Known {
				return fmt.Errorf("%s: %+v", img, s)
			}
			out[img] = s.Progress.Done
			most = max(most, s.Progress.Done)
		}
		if most < min {
			return fmt.Errorf("at most %d bytes in", most)
		}
		return nil
	})
	return out
}

// resumedAt waits for image's pull to be under way again and returns the
// bytes its first reading shows.
func resumedAt(t *testing.T, e *engine, image string) int64 {
	t.Helper()
	var done int64
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if s, _ := e.Status(image); s.State == pull.StatePulling && s.Progress != nil && s.Progress.Known {
			return s.Progress.Done
		} else if s.State == pull.StatePulled {
			t.Fatalf("%s pulled before a reading of its resumed pull", image)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not under way again within %s", image, waitLimit)
	return done
}

// TestSmallNotQueuedInRuntimeBehindLarge holds both slots with two large
// pulls on containerd 2, where the runtime's download limit (three) is one
// first-come queue for the node: y's one layer downloads slowly, x's first
// two take the other downloads and its third waits for one. x has fetched
// more; were y alone paused, the download it frees would go to x's third
// layer, queued before the small image's manifest, and the small image
// would wait for one of x's layers to end (half a minute). x, with a
// layer waiting, must be paused instead, and the small image be in within
// seconds. Containerd 1.6's limit is each pull's own: nothing to see there.
func TestSmallNotQueuedInRuntimeBehindLarge(t *testing.T) {
	skipShort(t)
	const (
		xLink = 4 << 20 // each of x's downloads: a layer takes half a minute
		yLink = 2 << 20 // y's one download: fetching at every reading, yet the least fetched
	)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "queue"})
	viaX, viaY := faults.StartSlowProxy(t, reg.Host, xLink), faults.StartSlowProxy(t, reg.Host, yLink)
	layer := int64(128 * testbed.MB)
	x := reg.PushRandom(t, "ai/x:v1", testbed.ImageOptions{LayerSize: layer, Layers: 3}).Ref
	y := reg.PushRandom(t, "ai/y:v1", testbed.ImageOptions{LayerSize: layer}).Ref
	x, y = strings.Replace(x, reg.Host, viaX.Host, 1), strings.Replace(y, reg.Host, viaY.Host, 1)
	small := reg.PushRandom(t, "app/sidecar:v1", testbed.ImageOptions{LayerSize: 5 * testbed.MB}).Ref

	n := startNode(t, "node-queue", testbed.WithContainerd2(t))
	store, err := n.cri.ContentStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, n.cri, pullengine.Options{Content: store, MaxParallelPulls: 2,
		LargePullBytes: largeBytes(), StallTimeout: pullengine.DefaultStallTimeout})
	e.Enqueue(e.ctx, pullengine.Request{Image: y})
	fetching(t, e, []string{y}, 1)
	e.Enqueue(e.ctx, pullengine.Request{Image: x})
	testbed.Eventually(t, waitLimit, "x fetching, past y", func() error {
		sx, _ := e.Status(x)
		sy, _ := e.Status(y)
		if sx.Progress == nil || sy.Progress == nil || sx.Progress.Done < sy.Progress.Done+32*testbed.MB {
			return fmt.Errorf("x %+v, y %+v", sx.Progress, sy.Progress)
		}
		return nil
	})

	paused := askSmall(t, e, n, small)
	if !slices.Contains(paused, x) {
		t.Errorf("paused %v, want %s, whose layer waited for the runtime's downloads", paused, x)
	}
}

// askSmall asks for the small image while the large pulls hold the
// slots, fails the test unless it is present within smallWithin, and
// returns the large pulls paused for it.
func askSmall(t *testing.T, e *engine, n *node, small string) []string {
	t.Helper()
	askUntilListed(t, e, n, pullengine.Request{Image: small}, smallWithin, "the small image", "beside the large pulls")
	return pausedForSmall(t, e, small)
}
