package e2e

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestRolloutWaves runs three real nodes, each reaching one registry
// through its own proxy, whose request log tells the nodes apart and
// times every request. With maxPulling 1 the nodes pull one after the
// other, in their rollout order; a canary with a missing tag fails on one
// node while no other asks the registry, and a fixed spec warms the fleet.
func TestRolloutWaves(t *testing.T) {
	const ns = "waves"
	nodes := []string{"node-1", "node-2", "node-3"}
	reg, f, proxies := slowFleet(t, ns, nodes, testbed.FleetOptions{})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	t.Run("maxPulling 1: one node pulls at a time, in rollout order", func(t *testing.T) {
		testOneAtATime(t, reg, f, proxies, ns, nodes)
	})

	t.Run("a canary with a missing tag fails on one node only; a fixed spec warms the fleet", func(t *testing.T) {
		iw := build.ImageWarm(ns, "canary", build.Images(reg.Ref("waves/missing:v1")))
		iw.Spec.Rollout = &warmv1.Rollout{Canary: true}
		f.Create(t, iw)
		canary := rolloutOrder(f.ImageWarm(t, ns, iw.Name).UID, nodes)[0]
		testbed.Eventually(t, 90*time.Second, "Rollout False CanaryFailed", func() error {
			c := meta.FindStatusCondition(f.ImageWarm(t, ns, iw.Name).Status.Conditions, warmv1.ConditionRollout)
			if c == nil || c.Reason != "CanaryFailed" || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("Rollout %+v", c)
			}
			if !strings.Contains(c.Message, canary) || !strings.Contains(c.Message, "NotFound") {
				return fmt.Errorf("the message does not name canary %s and NotFound: %s", canary, c.Message)
			}
			return nil
		})
		// Give the others time to ask, were they let through.
		time.Sleep(5 * time.Second)
		for _, n := range nodes {
			asked := len(requestsFor(proxies[n], "/v2/waves/missing/"))
			if n == canary && asked == 0 {
				t.Errorf("the canary %s never asked the registry", n)
			}
			if n != canary && asked != 0 {
				t.Errorf("%s asked the registry %d times for the missing tag; only the canary %s may", n, asked, canary)
			}
		}
		if r := f.ImageWarm(t, ns, iw.Name).Status.Rollout; r == nil || r.Admitted != 1 || r.Waiting != 2 {
			t.Errorf("rollout status %+v, want the canary admitted and 2 waiting", r)
		}

		fixed := reg.PushRandom(t, "waves/fixed:v1", testbed.ImageOptions{LayerSize: 1 << 20})
		cur := f.ImageWarm(t, ns, iw.Name)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Images = []warmv1.ImageReference{warmv1.ImageReference(fixed.Ref)}
		if err := f.CP.Client.Patch(t.Context(), cur, patch); err != nil {
			t.Fatal(err)
		}
		waitReady(t, f, ns, iw.Name)
		for _, n := range nodes {
			if !f.Nodes[n].Present(t, fixed.Ref) {
				t.Errorf("%s lacks %s after the fix", n, fixed.Ref)
			}
		}
		c := meta.FindStatusCondition(f.ImageWarm(t, ns, iw.Name).Status.Conditions, warmv1.ConditionRollout)
		if c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("Rollout after the fix: %+v", c)
		}
	})
}

// TestRolloutAheadOfStatus runs TestRolloutWaves' first wave with the
// controller's progress writes held back for an hour, as a fleet of
// hundreds of thousands of agents would space them (see
// controllers/imagewarm's progressInterval): the ImageWarm's status then
// moves only with its first write and its settled result, so each node
// after the first is admitted by the RolloutBound alone, the agents
// reading it with the permissions the manifests grant.
func TestRolloutAheadOfStatus(t *testing.T) {
	const ns = "ahead"
	nodes := []string{"node-1", "node-2", "node-3"}
	reg, f, proxies := slowFleet(t, ns, nodes, testbed.FleetOptions{ControllerFlags: []string{"--min-status-interval=1h"}})
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	testOneAtATime(t, reg, f, proxies, ns, nodes)
}

// testOneAtATime warms an image with maxPulling 1 and checks from the
// proxies' logs that the nodes pulled one after the other, in rollout
// order, with no long gap between two.
func testOneAtATime(t *testing.T, reg *testbed.Registry, f *testbed.Fleet, proxies map[string]*faults.FaultProxy, ns string, nodes []string) {
	app := reg.PushRandom(t, ns+"/app:v1", testbed.ImageOptions{LayerSize: 1 << 20, Layers: 2})
	iw := build.ImageWarm(ns, "one-at-a-time", build.Images(app.Ref))
	one := intstr.FromInt32(1)
	iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: &one}
	f.Create(t, iw)
	waitReady(t, f, ns, iw.Name)
	spans := pullSpans(t, proxies, "/v2/"+ns+"/app/")
	got := f.ImageWarm(t, ns, iw.Name)
	want := rolloutOrder(got.UID, nodes)
	checkOneAtATime(t, spans, want)
	if r := got.Status.Rollout; r == nil || r.Admitted != 3 || r.Waiting != 0 {
		t.Errorf("rollout status %+v, want 3 admitted, none waiting", r)
	}
}

// slowFleet starts a registry and a fleet of nodes labelled pool=pool,
// each reaching the registry through its own proxy, whose request log
// tells the nodes apart, and which sends blobs at 1 MiB/s: a pull takes
// seconds, so pulls that ran together cannot hide between two requests.
// opts adds to the fleet's options; its Containerd is set here.
func slowFleet(t *testing.T, pool string, nodes []string, opts testbed.FleetOptions) (*testbed.Registry, *testbed.Fleet, map[string]*faults.FaultProxy) {
	t.Helper()
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: pool})
	proxies := map[string]*faults.FaultProxy{}
	labels := map[string]map[string]string{}
	for _, n := range nodes {
		proxies[n] = faults.StartFaultProxy(t, reg.Host)
		proxies[n].Set(faults.Fault{Mode: faults.FaultSlow, Paths: faults.BlobPaths, Rate: 1 << 20})
		labels[n] = map[string]string{"pool": pool}
	}
	opts.Containerd = func(node string) []testbed.ContainerdOption {
		return []testbed.ContainerdOption{testbed.WithMirror(reg.Host, proxies[node].Host)}
	}
	return reg, testbed.StartFleet(t, labels, opts), proxies
}

func waitReady(t *testing.T, f *testbed.Fleet, ns, name string) {
	t.Helper()
	if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/"+name, "-n", ns, "--timeout=180s"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, f.ImageWarm(t, ns, name).Status)
	}
}

// rolloutOrder is the nodes in the order an ImageWarm's rollout admits
// them.
func rolloutOrder(uid types.UID, nodes []string) []string {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(warmv1.RolloutPlace(uid, a), warmv1.RolloutPlace(uid, b)), strings.Compare(a, b))
	})
	return out
}

// span is when one node's requests for an image began and ended.
type span struct {
	node       string
	start, end time.Time
}

func requestsFor(p *faults.FaultProxy, prefix string) []faults.ProxyRequest {
	var out []faults.ProxyRequest
	for _, r := range p.Requests() {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// pullSpans is each node's span of requests under prefix, by start.
func pullSpans(t *testing.T, proxies map[string]*faults.FaultProxy, prefix string) []span {
	t.Helper()
	var out []span
	for node, p := range proxies {
		reqs := requestsFor(p, prefix)
		if len(reqs) == 0 {
			t.Fatalf("%s never asked the registry for %s", node, prefix)
		}
		s := span{node: node, start: reqs[0].At}
		for _, r := range reqs {
			if r.Done.IsZero() {
				t.Fatalf("%s: %s %s still under way", node, r.Method, r.Path)
			}
			if r.Done.After(s.end) {
				s.end = r.Done
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b span) int { return a.start.Compare(b.start) })
	return out
}

// maxWaveGap is the longest wait allowed between one node's last request
// and the next node's first: seconds, for a busy CI machine.
const maxWaveGap = 8 * time.Second

// checkOneAtATime checks that no two nodes' requests overlapped, that the
// nodes pulled in the order want, and that none waited long for the one
// before it.
func checkOneAtATime(t *testing.T, spans []span, want []string) {
	t.Helper()
	var order []string
	for i, s := range spans {
		order = append(order, s.node)
		t.Logf("%s pulled from +%v to +%v", s.node, s.start.Sub(spans[0].start), s.end.Sub(spans[0].start))
		if i == 0 {
			continue
		}
		if s.start.Before(spans[i-1].end) {
			t.Errorf("%s began pulling at +%v, before %s was done at +%v", s.node,
				s.start.Sub(spans[0].start), spans[i-1].node, spans[i-1].end.Sub(spans[0].start))
		}
		// The report that frees the slot, the bound raised (at most every
		// 0.5 s) and the next agent's pass take about a second; a wave
		// that waited for a paced status write would wait longer.
		if gap := s.start.Sub(spans[i-1].end); gap > maxWaveGap {
			t.Errorf("%s began pulling %v after %s was done, want within %v", s.node, gap, spans[i-1].node, maxWaveGap)
		}
	}
	if !slices.Equal(order, want) {
		t.Errorf("nodes pulled in the order %v, want the rollout's %v", order, want)
	}
}
