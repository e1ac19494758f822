package pullengine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestYieldPausesWarmPulls runs the agent's default yielding on real
// containerd, 1.6 and 2.x: two warm pulls of larger images are under way
// over one shared link when a pull for someone else starts, made as the
// kubelet makes it (CRI PullImage on the same socket). The engine must
// yield to it and pause both warm pulls; the paused pulls' bytes must stay
// in the content store and stop arriving; once the other pull is in, the
// warm pulls must resume and complete; and the link must have carried
// every blob once: what the paused pulls had fetched is not fetched again.
func TestYieldPausesWarmPulls(t *testing.T) {
	onEachContainerd(t, testYieldPausesWarmPulls)
}

// yieldLink is the shared link's rate: slow enough that the warm pulls are
// caught midway and the other pull takes seconds.
const yieldLink = 8 << 20

func testYieldPausesWarmPulls(t *testing.T, opts []testbed.ContainerdOption) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "yield"})
	link := faults.StartLinkProxy(t, reg.Host, yieldLink)
	over := func(img testbed.Image) string { return strings.Replace(img.Ref, reg.Host, link.Host, 1) }
	var warm []string
	total := int64(0)
	for i := range 2 {
		img := reg.PushRandom(t, fmt.Sprintf("yield/warm%d:v1", i), testbed.ImageOptions{LayerSize: 24 * testbed.MB})
		warm, total = append(warm, over(img)), total+img.Size
	}
	podImg := reg.PushRandom(t, "yield/pod:v1", testbed.ImageOptions{LayerSize: 40 * testbed.MB})
	pod, total := over(podImg), total+podImg.Size

	n := startNode(t, "node-y", opts...)
	store, err := n.cri.ContentStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	e := startEngine(t, n.cri, pullengine.Options{Content: store, Yield: pullengine.YieldPause, MaxParallelPulls: 2,
		Registerer: metrics})
	for _, w := range warm {
		if st := e.Enqueue(e.ctx, pullengine.Request{Image: w}); st.State != pull.StateQueued {
			t.Fatalf("Enqueue(%s) = %+v", w, st)
		}
	}
	// Both warm pulls a third in: what a pause must not throw away.
	testbed.Eventually(t, waitLimit, "both warm pulls under way", func() error {
		for _, w := range warm {
			if s, _ := e.Status(w); s.Progress == nil || s.Progress.Done < 8*testbed.MB {
				return fmt.Errorf("%s: %+v", w, s.Progress)
			}
		}
		return nil
	})

	kubelet := kubeletPull(t, n.ctd.Endpoint, pod)
	paused := pausedWarmPulls(t, e, len(warm))
	if y := counter(t, metrics, "warmer_image_pull_yields_total"); y < 1 {
		t.Errorf("yields counted %v, want at least 1", y)
	}
	if p := counter(t, metrics, "warmer_image_pull_pauses_total"); p != float64(len(warm)) {
		t.Errorf("pauses counted %v, want %d", p, len(warm))
	}
	kept := pausedIngests(t, store, paused, kubelet)
	if err := <-kubelet; err != nil {
		t.Fatalf("the kubelet's pull: %v", err)
	}
	for range warm {
		if r := e.result(t); !r.Succeeded() {
			t.Errorf("%s after its pause: %+v", r.Ref, r)
		}
	}
	// Manifests and configs are a few KB; a blob fetched again after its
	// pause would add at least what it had (8 MB or more).
	sent := link.Sent()
	t.Logf("link carried %d bytes for %d bytes of layers; the paused pulls had %d bytes in", sent, total, kept)
	if slack := int64(testbed.MB); sent > total+slack {
		t.Errorf("link carried %d bytes, %d more than the images' layers: bytes fetched before the pause were fetched again", sent, sent-total)
	}
}

// kubeletPull pulls image as the kubelet does, over its own connection to
// the runtime; the channel gets the pull's error.
func kubeletPull(t *testing.T, endpoint, image string) <-chan error {
	t.Helper()
	c, err := criclient.New(context.Background(), criclient.Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	done := make(chan error, 1)
	go func() { _, err := c.PullImage(context.Background(), image, nil); done <- err }()
	return done
}

// pausedWarmPulls waits for n results saying a pull was paused and returns
// what each had fetched, by reference.
func pausedWarmPulls(t *testing.T, e *engine, n int) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for range n {
		r := e.result(t)
		if r.Class != pull.ClassCanceled || !strings.Contains(r.Message, "pull paused") {
			t.Fatalf("result %+v, want a warm pull paused", r)
		}
		out[r.Ref] = r.Fetched
	}
	return out
}

// pausedIngests checks, while the other pull goes on, that the paused
// pulls' layers are still being written in the content store (kept for
// their resumption) and that their bytes stopped arriving: a runtime that
// went on fetching would keep the link the pause was for. It returns the
// bytes the ingests hold.
func pausedIngests(t *testing.T, store *criclient.ContentStore, paused map[string]int64, kubelet <-chan error) int64 {
	t.Helper()
	big := func() map[string]int64 {
		ing, err := store.Ingests(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, i := range ing {
			// The warm layers (24 MB of payload), not the other pull's (40).
			if i.Total > 20*testbed.MB && i.Total < 30*testbed.MB {
				out[i.Digest] = i.Offset
			}
		}
		return out
	}
	time.Sleep(time.Second) // a cancelled fetch's last buffered bytes land
	first := big()
	time.Sleep(2 * time.Second)
	if len(kubelet) > 0 {
		t.Fatal("the kubelet's pull ended before the paused pulls could be watched; make it slower")
	}
	then := big()
	if len(first) != len(paused) {
		t.Errorf("after the pause the store holds ingests %v, want one partial layer per paused pull (%v)", first, paused)
	}
	var kept int64
	for d, off := range first {
		if then[d] != off {
			t.Errorf("paused layer %s went on from %d to %d bytes: the runtime kept fetching it", d, off, then[d])
		}
		kept += off
	}
	return kept
}

// counter reads a counter without labels from reg.
func counter(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
