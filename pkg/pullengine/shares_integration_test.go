package pullengine_test

import (
	"context"
	"fmt"
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

// trickle is the hog registry's pace on each connection: a byte arrives
// every moment, so the stall detector never fires, and a 2 MB layer takes
// minutes.
const trickle = 8 << 10

// victimWithin is how soon the victim's image must be in: seconds, not the
// hog's pull timeout.
const victimWithin = 20 * time.Second

// TestTrickleHogDoesNotStarve runs on real containerd the attack of a
// namespace that names, on a registry trickling a byte just often enough
// to beat the stall detector, as many images as the node has pull slots:
// while those pulls hold every slot, another namespace's small image on a
// normal registry must still be in within seconds, with the hog's pulls
// still under way, one of them paused and queued again. On containerd 1.6
// and 2.x.
func TestTrickleHogDoesNotStarve(t *testing.T) {
	onEachContainerd(t, testTrickleHogDoesNotStarve)
}

func testTrickleHogDoesNotStarve(t *testing.T, opts []testbed.ContainerdOption) {
	const slots = 2
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "hog"})
	slow := faults.StartSlowProxy(t, reg.Host, trickle)
	var hog []string
	for i := range slots {
		img := reg.PushRandom(t, fmt.Sprintf("hog/trickle%d:v1", i), testbed.ImageOptions{LayerSize: 2 * testbed.MB})
		hog = append(hog, strings.Replace(img.Ref, reg.Host, slow.Host, 1))
	}
	victim := reg.PushRandom(t, "victim/app:v1", testbed.ImageOptions{LayerSize: testbed.MB}).Ref

	n := startNode(t, "node-hog", opts...)
	store, err := n.cri.ContentStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	e := startEngine(t, n.cri, pullengine.Options{Content: store, MaxParallelPulls: slots,
		StallTimeout: pullengine.DefaultStallTimeout, Registerer: metrics})
	trickling(t, e, hog)

	askUntilListed(t, e, n, pullengine.Request{Image: victim, Share: "victim"}, victimWithin, "the victim's image", "beside the trickling hog")
	hogUnderWay(t, e, hog)
	// Two results so far: the victim's pull, and one of the hog's paused.
	for _, r := range e.resultsByRef(t, 2) {
		switch {
		case r.Image == victim && r.Succeeded():
		case slices.Contains(hog, r.Image) && r.Class == pull.ClassCanceled && strings.Contains(r.Message, "pull paused"):
		default:
			t.Errorf("result %+v, want the victim's pulled and one of the hog's paused", r)
		}
	}
	if p := counter(t, metrics, "warmer_image_pull_share_pauses_total"); p != 1 {
		t.Errorf("share pauses counted %v, want 1", p)
	}
}

// trickling queues the hog's images for share "hog" and waits until every
// one's pull is fetching its layers: they hold every slot.
func trickling(t *testing.T, e *engine, hog []string) {
	t.Helper()
	for _, h := range hog {
		if st := e.Enqueue(e.ctx, pullengine.Request{Image: h, Share: "hog"}); st.State != pull.StateQueued {
			t.Fatalf("Enqueue(%s) = %+v", h, st)
		}
	}
	testbed.Eventually(t, waitLimit, "the hog's pulls fetching their layers", func() error {
		for _, h := range hog {
			if s, _ := e.Status(h); s.Progress == nil || !s.Progress.Known || s.Progress.Done == 0 {
				return fmt.Errorf("%s: %+v", h, s)
			}
		}
		return nil
	})
}

// hogUnderWay checks that the hog's pulls are pulling or queued again, at
// least one still pulling: the victim did not need them ended.
func hogUnderWay(t *testing.T, e *engine, hog []string) {
	t.Helper()
	pulling := 0
	for _, h := range hog {
		switch s, _ := e.Status(h); s.State {
		case pull.StatePulling:
			pulling++
		case pull.StateQueued:
		default:
			t.Errorf("%s: %+v, want still pulling or queued again", h, s)
		}
	}
	if pulling == 0 {
		t.Error("no pull of the hog's under way: the victim must not have needed it ended")
	}
}
