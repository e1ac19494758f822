package registry

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// Sizes of the bomb test: a gigabyte of image filesystem, a tmpfs, which
// the 4 GiB the bomb unpacks to would fill four times over; the layer is
// about 4 MiB to fetch, so twice that fits the room below 80 % easily.
const (
	bombFs       = 1024 * testbed.MB
	bombUnpacked = 4 << 30
	bombPercent  = 80
)

// TestGzipBomb warms a gzip bomb through the real agent on each of the
// bed's containerds, on an image filesystem far smaller than the bomb
// unpacks to: the pull must be stopped while it unpacks, before the
// filesystem passes the threshold (sampled throughout); the status and
// the event say the image unpacked past the room; the room comes back,
// the bomb is not fetched again, and another namespace's small image on
// the same node still warms.
//
// The image filesystem is a tmpfs (testbed.WithImageFilesystemSize), not
// a loop-mounted file: it lies inside the containerd's directory, so the
// bed detaches it with everything else even when the test fails or is
// killed, it writes nothing to the shared host's disk, and it costs only
// the memory the pull writes before it is stopped, under a gigabyte.
func TestGzipBomb(t *testing.T) {
	versions := testbed.ContainerdVersions()
	nodes := map[string]map[string]string{}
	byNode := map[string]testbed.ContainerdVersion{}
	for i, v := range versions {
		name := []string{"bomb-16", "bomb-2"}[i]
		nodes[name], byNode[name] = nil, v
	}
	s := settings
	s.DiskThresholdPercent = bombPercent
	f := testbed.StartFleet(t, nodes, testbed.FleetOptions{
		Agent: &s,
		Containerd: func(node string) []testbed.ContainerdOption {
			return append(byNode[node].Options(t), testbed.WithImageFilesystemSize(bombFs))
		},
	})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "bomb"})
	built := time.Now()
	img := testbed.BombImage(t, bombUnpacked)
	bomb := reg.Push(t, "bomb/zeros:v1", img)
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := ls[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bomb of %d MiB unpacked, %d KiB to fetch, built and pushed in %v", bombUnpacked>>20, bomb.Size>>10, time.Since(built).Round(time.Millisecond))
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "victim"}})
	for i, v := range versions {
		node := []string{"bomb-16", "bomb-2"}[i]
		t.Run(v.Name, func(t *testing.T) { testBomb(t, f, reg, bomb, layer.String(), node) })
	}
}

func testBomb(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, bomb testbed.Image, layer, node string) {
	n := f.Nodes[node]
	p := faults.StartFaultProxy(t, reg.Host)
	ref := via(bomb, reg, p)
	capacity, before := fsSpace(t, n.Containerd.Root())
	allowed := capacity / 100 * bombPercent
	sample := sampleFree(t, n.Containerd.Root())
	start := time.Now()
	warmOn(t, f, "bomb-"+node, node, 0, ref)
	got := waitReason(t, f, node, ref, "DiskPressure", 60*time.Second)
	t.Logf("stopped after %v: %s", time.Since(start).Round(100*time.Millisecond), got.Message)
	if !strings.Contains(got.Message, "the image unpacked past the room") || !strings.Contains(got.Message, "below the 80% pull threshold") ||
		!strings.Contains(got.Message, "MiB") {
		t.Errorf("status message %q does not say the image unpacked past the room, with sizes", got.Message)
	}
	note, err := failedEvent(t, f, "bomb-"+node, "DiskPressure")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "unpacked past the room") {
		t.Errorf("event %q does not say the image unpacked past the room", note)
	}
	// The cancelled unpack's snapshot goes with its lease: the room comes
	// back, all but the bomb's few fetched megabytes at most.
	testbed.Eventually(t, 30*time.Second, "the room back", func() error {
		if _, free := fsSpace(t, n.Containerd.Root()); free+16*testbed.MB < before {
			return fmt.Errorf("%d MiB free, %d before the bomb", free>>20, before>>20)
		}
		return nil
	})
	least := sample()
	t.Logf("image filesystem: %d MiB, %d MiB free before, at least %d MiB free during the pull (the threshold leaves %d MiB)",
		capacity>>20, before>>20, least>>20, (capacity-allowed)>>20)
	if capacity-least > allowed {
		t.Errorf("the filesystem reached %d MiB used, past the %d%% threshold (%d MiB)", (capacity-least)>>20, bombPercent, allowed>>20)
	}

	small := via(reg.PushRandom(t, "victim/small:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, p)
	iw := build.ImageWarm("victim", "small-"+node, build.Images(small), build.MatchLabel(corev1.LabelHostname, node))
	create(t, f, iw, 0)
	waitPresent(t, f, node, small, 30*time.Second)
	if n.Present(t, ref) {
		t.Errorf("the bomb %s is present", ref)
	}
	// Held for its size, not tried again: its layer was fetched once.
	if got := blobGets(p, layer); got != 1 {
		t.Errorf("the bomb's layer was fetched %d times in %v, want once", got, time.Since(start).Round(time.Second))
	}
}

// fsSpace is a filesystem's capacity and free bytes.
func fsSpace(t *testing.T, path string) (capacity, free uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize)
}

// sampleFree reads path's free space every 5 ms until the returned
// function is called, which returns the least seen.
func sampleFree(t *testing.T, path string) func() uint64 {
	_, least := fsSpace(t, path)
	var mu sync.Mutex
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var st unix.Statfs_t
			if unix.Statfs(path, &st) == nil {
				mu.Lock()
				least = min(least, st.Bavail*uint64(st.Bsize))
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	end := func() uint64 {
		once.Do(func() { close(stop); <-done })
		mu.Lock()
		defer mu.Unlock()
		return least
	}
	t.Cleanup(func() { end() })
	return end
}

// blobGets counts the proxy's GETs of a blob.
func blobGets(p *faults.FaultProxy, digest string) int {
	c := 0
	for _, r := range p.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/blobs/"+digest) {
			c++
		}
	}
	return c
}
