package registry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// diskSize is the image filesystem of the disk nodes: a real tmpfs, small
// enough to fill in a test.
const diskSize = 64 * testbed.MB

// TestDiskPressure gives each node's containerd a 64 MB image filesystem
// and the agents a 50 % threshold.
func TestDiskPressure(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{"node-fill": nil, "node-enospc": nil}, testbed.FleetOptions{
		Agent: agentSettings("--image-fs-threshold-percent=50"),
		Containerd: func(string) []testbed.ContainerdOption {
			return []testbed.ContainerdOption{testbed.WithImageFilesystemSize(diskSize)}
		},
	})
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "disk"})

	t.Run("guard holds pulls above the threshold and resumes when space is freed", func(t *testing.T) {
		testGuard(t, f, reg, "node-fill")
	})
	t.Run("runtime out of space mid-pull", func(t *testing.T) { testOutOfSpace(t, f, reg, "node-enospc") })
	t.Run("an image that cannot fit is never started", func(t *testing.T) { testTooBig(t, f, reg, "node-fill") })
}

// testGuard fills the filesystem to 62 % with a file: the agent must not
// pull at all, and must pull once the file is gone.
func testGuard(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, node string) {
	n := f.Nodes[node]
	filler := n.Containerd.Fill(40 * testbed.MB)
	// The guard caches its reading for DefaultDiskCheckInterval and the
	// node has no NodeWarm to watch yet: outwait the cache, or a pull could
	// start on a reading from before the filler.
	time.Sleep(pullengine.DefaultDiskCheckInterval + testbed.BusyMargin)
	p := faults.StartFaultProxy(t, reg.Host)
	ref := via(reg.PushRandom(t, "disk/fill:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, p)
	warmOn(t, f, "fill", node, 0, ref)
	got := waitReason(t, f, node, ref, "DiskPressure", 60*time.Second)
	t.Logf("status: %s %s: %s", got.State, got.Reason, got.Message)
	if fs, _ := nodeWarmDisk(t, f, node); fs == nil || fs.UsedPercent <= 50 {
		t.Errorf("NodeWarm image filesystem %+v, want above 50 %%", fs)
	}
	waitDiskCondition(t, f, node, metav1.ConditionTrue)
	// Held back, not failing: the registry is never asked, though the
	// engine tries again once the guard's reading is due again.
	time.Sleep(pullengine.DefaultDiskCheckInterval + testbed.BusyMargin)
	if r := p.Requests(); len(r) != 0 {
		t.Fatalf("the registry was asked %d times under disk pressure: %+v", len(r), r)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	// The guard rereads the filesystem once its reading is older than
	// DefaultDiskCheckInterval, when the held pull is tried again.
	waitPresent(t, f, node, ref, pullengine.DefaultDiskCheckInterval+testbed.SettleMargin)
	t.Logf("pulled %v after the space was freed", time.Since(freed).Round(100*time.Millisecond))
	waitDiskCondition(t, f, node, metav1.ConditionFalse)
}

// testOutOfSpace warms an image that cannot fit unpacked: the filesystem
// is nearly empty and its layer small to fetch, so the guard and the size
// check let the pull start. Either the unpack check stops it as it
// unpacks past the room (unpack.go; TestGzipBomb shows that on a
// filesystem large enough to see it coming), or, on this 64 MB one, the
// unpack outruns the check and the runtime runs out of space. Either way
// the agent must not pull again at once: held for its size, or backing
// off like after any failed pull (it pulled dozens of times a second,
// before runtime out-of-space failures started a back-off).
func testOutOfSpace(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, node string) {
	p := faults.StartFaultProxy(t, reg.Host)
	// A megabyte to fetch, 71 unpacked: more than the 64 MB there are,
	// though twice the bytes fetched fit below the threshold.
	ref := via(reg.PushRandom(t, "disk/huge:v1", testbed.ImageOptions{LayerSize: testbed.MB, Zeros: 70 * testbed.MB}), reg, p)
	created := time.Now()
	warmOn(t, f, "huge", node, 0, ref)
	got := waitReason(t, f, node, ref, "DiskPressure", 60*time.Second)
	t.Logf("status: %s %s: %s", got.State, got.Reason, got.Message)
	note, err := failedEvent(t, f, "huge", "DiskPressure")
	if err != nil {
		t.Fatal(err)
	}
	// The summed event is written once the failing set has held still
	// for a few seconds; by then the unpack's leftovers may have tripped
	// the guard, whose message then stands in the event. The agent's log
	// keeps the pull's own failure.
	log := f.Nodes[node].Agent.Log(400)
	if !strings.Contains(note, "no space left on device") && !strings.Contains(log, "no space left on device") &&
		!strings.Contains(log, "the image unpacked past the room") {
		t.Errorf("first DiskPressure failure is neither the runtime's nor the unpack check's: %s", note)
	}
	// Long enough for the back-off to reach its cap and stay there a while.
	watch := 5 * settings.BackOffMax
	time.Sleep(watch)
	// Each pull resolves the tag with one HEAD; none is repeated at once
	// on this failure, so HEADs are pulls that reached the registry.
	var heads []time.Time
	for _, r := range p.Requests() {
		if r.Method == "HEAD" && strings.Contains(r.Path, "/manifests/") {
			heads = append(heads, r.At)
		}
	}
	pulls := f.Nodes[node].Metric(t, "warmer_image_pulls_total", `reason="DiskPressure"`)
	// The first pull came after the ImageWarm was created; the back-off
	// (settings.BackOff) allows at most this many since, the guard
	// refusing some of them before the registry is asked.
	elapsed := time.Since(created)
	most := settings.MaxAttempts(elapsed)
	t.Logf("in %v: %d pulls reached the registry, %v counted with reason DiskPressure; the back-off allows %d",
		elapsed.Round(100*time.Millisecond), len(heads), pulls, most)
	if len(heads) > most || pulls > float64(most) {
		t.Errorf("%d pulls reached the registry, %v counted, in %v: not backing off (at most %d)", len(heads), pulls, elapsed, most)
	}
	for i := 1; i < len(heads); i++ {
		if gap := heads[i].Sub(heads[i-1]); gap < settings.BackOffInitial-50*time.Millisecond {
			t.Errorf("pull %d came %v after the previous one, within the back-off", i+1, gap)
		}
	}
	if f.Nodes[node].Present(t, ref) {
		t.Errorf("%s present on a filesystem it cannot fit", ref)
	}
}

// testTooBig warms an image whose layers, fetched and unpacked, would take
// more than the room below the threshold, beside a small one, both
// slowed: the agent cancels the big pull once its manifest shows the size,
// long before its layers arrive, reports DiskPressure with the sizes, and
// does not ask the registry for it again while the room is not there; the
// small one is warmed.
func testTooBig(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, node string) {
	p := faults.StartFaultProxy(t, reg.Host)
	n := f.Nodes[node]
	// 24 MB to fetch, 48 to hold: more than the 32 MB below 50 %.
	big := reg.PushRandom(t, "disk/big:v1", testbed.ImageOptions{LayerSize: 12 * testbed.MB, Layers: 2})
	bigRef := via(big, reg, p)
	small := via(reg.PushRandom(t, "disk/small:v1", testbed.ImageOptions{LayerSize: testbed.MB}), reg, p)
	p.Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: 4 * int(testbed.MB)})
	fetchedBefore := n.Metric(t, "warmer_image_fetched_bytes_total")
	warmOn(t, f, "too-big", node, 0, bigRef, small)
	got := waitReason(t, f, node, bigRef, "DiskPressure", 60*time.Second)
	t.Logf("status: %s %s: %s", got.State, got.Reason, got.Message)
	if !strings.Contains(got.Message, "needs about") || !strings.Contains(got.Message, "below the 50% pull threshold") {
		t.Errorf("message %q does not give the sizes and the threshold", got.Message)
	}
	waitPresent(t, f, node, small, testbed.SettleMargin)
	if d := n.Metric(t, "warmer_image_fetched_bytes_total") - fetchedBefore; d > float64(big.Size)/2 {
		t.Errorf("%v bytes fetched: the big image's pull went on long after its size was known (%d bytes)", d, big.Size)
	}
	asked := bigRequests(p)
	// Two of the guard's readings, each of which lets the image be tried.
	time.Sleep(2*pullengine.DefaultDiskCheckInterval + testbed.BusyMargin)
	if later := bigRequests(p); later != asked {
		t.Errorf("the registry was asked for the big image %d more times while it could not fit", later-asked)
	}
	if n.Present(t, bigRef) {
		t.Errorf("%s present on a filesystem it cannot fit", bigRef)
	}
}

// bigRequests counts the proxy's requests for repository disk/big.
func bigRequests(p *faults.FaultProxy) int {
	c := 0
	for _, r := range p.Requests() {
		if strings.Contains(r.Path, "/disk/big/") {
			c++
		}
	}
	return c
}

// warmOn is warm for one node.
func warmOn(t *testing.T, f *testbed.Fleet, name, node string, timeout time.Duration, refs ...string) {
	t.Helper()
	iw := build.ImageWarm(ns, name, build.Images(refs...), build.MatchLabel(corev1.LabelHostname, node))
	create(t, f, iw, timeout)
}

// nodeWarmDisk is the node's image filesystem and DiskPressure condition as
// its NodeWarm reports them.
func nodeWarmDisk(t *testing.T, f *testbed.Fleet, node string) (*warmv1.ImageFilesystem, *metav1.Condition) {
	t.Helper()
	var nw warmv1.NodeWarm
	if err := f.CP.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw); err != nil {
		t.Fatal(err)
	}
	return nw.Status.ImageFilesystem, meta.FindStatusCondition(nw.Status.Conditions, "DiskPressure")
}

// waitDiskCondition waits for the NodeWarm's DiskPressure condition, for
// as long as a new disk reading and a pass to report it may take.
func waitDiskCondition(t *testing.T, f *testbed.Fleet, node string, want metav1.ConditionStatus) {
	t.Helper()
	within := pullengine.DefaultDiskCheckInterval + settings.Resync + testbed.SettleMargin
	testbed.Eventually(t, within, "DiskPressure condition "+string(want), func() error {
		if _, c := nodeWarmDisk(t, f, node); c == nil || c.Status != want {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}
