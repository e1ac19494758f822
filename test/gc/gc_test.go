// Package gc tests warmed images against the kubelet's image garbage
// collector on a real node: pinned images survive it, unpinned ones are
// collected, pulled again no more often than the back-off allows, and
// reported as evicted repeatedly; a pin warmer did not make is never
// undone.
//
// # How the kubelet is made to collect within seconds
//
// The kubelet's periodic image GC (imageGCHighThresholdPercent and
// imageMaximumGCAge) runs every 5 minutes (ImageGCPeriod, a constant of
// the kubelet, not a setting), and its max-age pass only once the kubelet
// has run longer than the maximum age: no test of that fits in a couple of
// minutes. The kubelet has a second, faster caller of the same collector:
// its eviction manager, every 10 s, under an imagefs.available threshold
// the node is below, reclaims space by deleting every unused image
// (DeleteUnusedImages) with the same eviction order, which skips images
// the runtime reports pinned. This test sets that threshold above what the
// disk has free and imageMinimumGCAge to 1 s, so every unused, unpinned
// image goes within about 10 s of its arrival. The agent runs as a process
// beside the node, so no pod of it can be evicted.
package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	ns = "default"
	// mirrored is the public registry whose pulls the node serves from the
	// test registry.
	mirrored = "ghcr.io"
)

// settings are the agent's: a short resync so an eviction is seen within
// seconds, and an eviction back-off whose windows the test measures.
var settings = testbed.AgentSettings{
	Resync:               2 * time.Second,
	BackOffInitial:       5 * time.Second,
	BackOffMax:           20 * time.Second,
	ProgressInterval:     500 * time.Millisecond,
	DiskThresholdPercent: testbed.DefaultAgent.DiskThresholdPercent,
	LogLevel:             "debug",
}

// collecting is the kubelet configuration that collects unused images
// within about 10 s (see the package doc).
var collecting = testbed.CollectingKubeletConfig()

// bed is one real node with the agent running beside it.
type bed struct {
	node  *testbed.RealNode
	agent *testbed.Process
	cri   runtimeapi.ImageServiceClient
}

func TestPinnedSurviveImageGC(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "gc"})
	for _, r := range []string{"gc/kept:v1", "gc/loose:v1", "gc/theirs:v1"} {
		reg.PushRandom(t, r, testbed.ImageOptions{LayerSize: testbed.MB})
	}
	kept, loose, theirs := mirrored+"/gc/kept:v1", mirrored+"/gc/loose:v1", mirrored+"/gc/theirs:v1"
	node := testbed.StartNode(t, testbed.NodeOptions{Name: "gc-node", Mirrors: map[string]string{mirrored: reg.Host}, KubeletConfig: collecting})
	b := &bed{node: node, cri: node.Containerd.ImageService(t)}

	// Someone else pins theirs before warmer runs: the kubelet's
	// collector may take it between the pull and the label, so try again.
	testbed.Eventually(t, time.Minute, "theirs pulled and pinned by hand", func() error { return b.pinByHand(t, theirs) })
	b.agent = startAgent(t, node)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", b.agent.Log(40))
			t.Logf("kubelet log, images and eviction:\n%s", grepLines(node.KubeletLog(3000), "viction", "mage", "garbage"))
		}
	})
	// Pinned reaches past the namespace: config/policy leaves it to the
	// namespaces an operator marked.
	node.AllowClusterLevers(t, ns)
	keptWarm := newWarm("kept", warmv1.RetentionPinned, kept)
	b.create(t, keptWarm)
	b.create(t, newWarm("loose", warmv1.RetentionUnpinned, loose))
	b.create(t, newWarm("others", warmv1.RetentionPinned, theirs))

	testbed.Eventually(t, 2*time.Minute, "kept and theirs pinned in CRI and the NodeWarm", func() error {
		return b.pinnedEverywhere(t, kept, theirs)
	})
	b.checkMarks(t, kept)

	// The collector takes loose over and over; kept and theirs stay.
	arrivals := b.watchArrivals(t, loose, []string{kept, theirs}, 70*time.Second)
	checkSpacing(t, arrivals)
	testbed.Eventually(t, time.Minute, "loose reported EvictedRepeatedly", func() error {
		img, err := b.nodeImage(loose)
		if err != nil {
			return err
		}
		if img.Reason != warmv1.ReasonEvictedRepeatedly || !strings.Contains(img.Message, "too small") {
			return fmt.Errorf("loose is %s/%s: %q", img.State, img.Reason, img.Message)
		}
		return nil
	})
	if n := len(b.events(t, "loose", warmv1.ReasonEvicted)); n == 0 {
		t.Error("no Evicted event on ImageWarm loose")
	}

	// The Pinned ImageWarm that wanted theirs goes: someone else's pin
	// stays, and theirs outlives the collector.
	b.delete(t, "others")
	time.Sleep(3*settings.Resync + 10*time.Second + testbed.BusyMargin) // passes of the agent, a pass of the collector
	if !b.pinnedInCRI(t, theirs) {
		t.Error("theirs, pinned by someone else, was unpinned")
	}

	// kept switches to Unpinned: warmer unpins it, and the collector takes
	// it.
	b.setRetention(t, "kept", warmv1.RetentionUnpinned)
	testbed.Eventually(t, time.Minute, "kept unpinned", func() error {
		if b.present(t, kept) && b.pinnedInCRI(t, kept) {
			return errors.New("kept still pinned")
		}
		return nil
	})
	b.checkMarks(t)
	testbed.Eventually(t, time.Minute, "kept collected once unpinned", func() error {
		if b.present(t, kept) {
			return errors.New("kept still on the node")
		}
		return nil
	})
	if !b.present(t, theirs) {
		t.Error("theirs, pinned by someone else, was collected")
	}
}

// startAgent runs the agent for the node beside it, as a process, with
// its service account's token and the shipped roles and policies.
func startAgent(t *testing.T, node *testbed.RealNode) *testbed.Process {
	t.Helper()
	metrics, probe := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	args := append([]string{testbed.BuildWarmer(t), "agent", "--kubeconfig", node.AgentKubeconfig(t, node.Name), "--node-name", node.Name,
		"--container-runtime-endpoint", node.Containerd.Endpoint, "--metrics-bind-address", metrics,
		"--health-probe-bind-address", probe}, settings.Flags()...)
	return testbed.StartProcess(t, "agent "+node.Name, args...)
}

func newWarm(name string, retention warmv1.Retention, images ...string) *warmv1.ImageWarm {
	iw := build.ImageWarm(ns, name, build.Images(images...))
	iw.Spec.Retention = retention
	return iw
}

func (b *bed) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := b.node.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (b *bed) delete(t *testing.T, name string) {
	t.Helper()
	if err := b.node.Client.Delete(context.Background(), &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

func (b *bed) setRetention(t *testing.T, name string, r warmv1.Retention) {
	t.Helper()
	var iw warmv1.ImageWarm
	ctx := context.Background()
	if err := b.node.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &iw); err != nil {
		t.Fatal(err)
	}
	iw.Spec.Retention = r
	if err := b.node.Client.Update(ctx, &iw); err != nil {
		t.Fatal(err)
	}
}

// pinByHand pulls ref through CRI and labels it pinned as an operator
// would with ctr, without warmer's mark.
func (b *bed) pinByHand(t *testing.T, ref string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.cri.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		return err
	}
	_, err := b.node.Containerd.Ctr("-n", "k8s.io", "images", "label", ref, criclient.PinLabel+"="+criclient.PinValue)
	return err
}

// image is the runtime's image named ref, nil when absent.
func (b *bed) image(t *testing.T, ref string) *runtimeapi.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.cri.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	return resp.GetImage()
}

func (b *bed) present(t *testing.T, ref string) bool { return b.image(t, ref) != nil }

// pinnedInCRI says whether CRI reports ref pinned, as the kubelet reads it.
func (b *bed) pinnedInCRI(t *testing.T, ref string) bool { return b.image(t, ref).GetPinned() }

func (b *bed) nodeImage(ref string) (warmv1.NodeImage, error) {
	var nw warmv1.NodeWarm
	if err := b.node.Client.Get(context.Background(), types.NamespacedName{Name: b.node.Name}, &nw); err != nil {
		return warmv1.NodeImage{}, err
	}
	for _, img := range nw.Status.Images {
		if img.Image == ref {
			return img, nil
		}
	}
	return warmv1.NodeImage{}, fmt.Errorf("NodeWarm lists no %s", ref)
}

// pinnedEverywhere checks refs are present and pinned in CRI and in the
// NodeWarm, whose Pinning condition is True.
func (b *bed) pinnedEverywhere(t *testing.T, refs ...string) error {
	for _, ref := range refs {
		if !b.pinnedInCRI(t, ref) {
			return fmt.Errorf("%s not pinned in CRI", ref)
		}
		img, err := b.nodeImage(ref)
		if err != nil {
			return err
		}
		if img.State != warmv1.ImagePresent || !img.Pinned {
			return fmt.Errorf("NodeWarm: %s is %s, pinned %v", ref, img.State, img.Pinned)
		}
	}
	var nw warmv1.NodeWarm
	if err := b.node.Client.Get(context.Background(), types.NamespacedName{Name: b.node.Name}, &nw); err != nil {
		return err
	}
	c := meta.FindStatusCondition(nw.Status.Conditions, warmv1.ConditionPinning)
	if c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Pinning condition %+v", c)
	}
	return nil
}

// checkMarks checks that warmer's mark is on exactly the names want.
func (b *bed) checkMarks(t *testing.T, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := criclient.New(ctx, criclient.Config{Endpoint: b.node.Containerd.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Pinner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Mine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Errorf("names with warmer's mark %v, want %v", got, want)
	}
}

// watchArrivals polls the runtime for d, recording each time ref arrives
// (absent before, present now), and fails if any of stay is ever absent.
func (b *bed) watchArrivals(t *testing.T, ref string, stay []string, d time.Duration) []time.Time {
	t.Helper()
	var arrivals []time.Time
	was, evictions := false, 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		now, is := time.Now(), b.present(t, ref)
		switch {
		case is && !was:
			arrivals = append(arrivals, now)
		case !is && was:
			evictions++
		}
		was = is
		for _, s := range stay {
			if !b.present(t, s) {
				t.Fatalf("pinned %s collected %v into the watch", s, time.Since(end.Add(-d)).Round(time.Second))
			}
		}
	}
	t.Logf("%s: %d arrivals, %d removals by the kubelet in %v", ref, len(arrivals), evictions, d)
	if evictions < 2 {
		t.Fatalf("the kubelet removed %s %d times in %v, want at least 2: is its collector running?", ref, evictions, d)
	}
	return arrivals
}

// checkSpacing checks that the k-th pull after an eviction came no sooner
// than the k-th back-off window after the arrival before it: after an
// eviction the agent waits out the window from the image's last arrival
// (which it sees at or after the real one). The first arrival is the
// warm's own pull.
func checkSpacing(t *testing.T, arrivals []time.Time) {
	t.Helper()
	// The poll sees each arrival up to its interval late.
	const slack = 500 * time.Millisecond
	for k := 1; k < len(arrivals); k++ {
		gap, window := arrivals[k].Sub(arrivals[k-1]), settings.BackOff(k)
		t.Logf("arrival %d: %v after the one before (window %v)", k+1, gap.Round(100*time.Millisecond), window)
		if gap < window-slack {
			t.Errorf("arrival %d came %v after the one before, within the %v back-off window", k+1, gap, window)
		}
	}
}

func (b *bed) events(t *testing.T, name, reason string) []string {
	t.Helper()
	f := &testbed.Fleet{CP: b.node.ControlPlane}
	var notes []string
	for _, e := range f.Events(t, ns, name, reason) {
		notes = append(notes, e.Note)
	}
	return notes
}

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// grepLines keeps the last 60 lines of log that hold any of words.
func grepLines(log string, words ...string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep[max(0, len(keep)-60):], "\n")
}
