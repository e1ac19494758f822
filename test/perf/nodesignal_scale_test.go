package perf

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
)

// BenchmarkNodeSignals counts what the agents' node signals write over a
// warm of a simulated fleet (BENCH_SIGNALS_N nodes, 100 by default; the
// scale bed of BenchmarkScale, its agents with --node-signals on): one
// ImageWarm of ten images with spec.nodeLabel and spec.startupTaint, so
// that each node gains its warm label and its ImagesWarm condition moves
// from NothingToWarm through ImagesMissing to ImagesPresent. The Node
// writes the API server counted (PATCH nodes: labels; PATCH nodes/status:
// the condition) are held against the changes a watch of the Nodes saw:
// a write that changed nothing fails the run, and so does more than one
// label write a node.
func BenchmarkNodeSignals(b *testing.B) {
	n := envInt(b, "BENCH_SIGNALS_N", 100)
	for b.Loop() {
		runNodeSignals(b, n)
	}
}

func runNodeSignals(b *testing.B, n int) {
	ctx := context.Background()
	sim := startSimFleet(b, n, scale.Options{PullLatency: scalePullLatency, NodeSignals: true},
		fleetPlane{before: func(cp *testbed.ControlPlane) { cp.AllowClusterLevers(b, "default") }})
	cp := sim.cp
	seen := watchSignals(b, cp)
	before := apiMetrics(b, cp.Config)
	iw := fleetWarm(scaleCase{n: n, images: 10})
	iw.Spec.NodeLabel, iw.Spec.StartupTaint = true, true
	start := time.Now()
	if err := cp.Client.Create(ctx, iw); err != nil {
		b.Fatal(err)
	}
	key := warmv1.NodeLabelKey("default", "fleet")
	eventually(b, 5*time.Minute, "every node warm and labelled", func() error {
		sim.failIfRefused(b)
		if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, iw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) || int(iw.Status.Nodes.Ready) != n {
			return fmt.Errorf("ImageWarm nodes %+v", iw.Status.Nodes)
		}
		if l := labelled(b, cp, key); l != n {
			return fmt.Errorf("%d of %d nodes labelled (the watch saw %d)", l, n, seen.labelled(key))
		}
		return nil
	})
	took := time.Since(start)
	time.Sleep(5 * time.Second) // trailing writes belong to the warm
	writes := writesByResource(before, apiMetrics(b, cp.Config))
	labels, conditions, rewrites := seen.stop()
	if len(seen.other) > 0 {
		b.Fatalf("the watch of Nodes said %q: its counts may be short", seen.other)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(writes["nodes"]/float64(n), "label-writes/node")
	b.ReportMetric(writes["nodes/status"]/float64(n), "condition-writes/node")
	fmt.Printf("\nNode signals: %d simulated agents, one ImageWarm of 10 images with nodeLabel and startupTaint, warm in %v\n", n, took.Round(time.Second))
	fmt.Printf("writes counted by the API server: PATCH nodes %.0f, nodes/status %.0f; changes a watch saw: labels %d, ImagesWarm %d (and %d writes of it that moved its heartbeat only); writes to nodewarms/status %.0f\n\n",
		writes["nodes"], writes["nodes/status"], labels, conditions, rewrites, writes["nodewarms/status"])
	if writes["nodes"] > float64(labels) || writes["nodes"] > float64(n) {
		b.Errorf("%.0f label writes for %d label changes on %d nodes: at most one a change, one a node", writes["nodes"], labels, n)
	}
	if writes["nodes/status"] > float64(conditions) {
		b.Errorf("%.0f condition writes for %d changes of ImagesWarm: a write changed nothing", writes["nodes/status"], conditions)
	}
}

// signalWatch follows the fleet's Nodes and counts the changes of their
// warm labels and of their ImagesWarm condition (status, reason,
// message) since it started.
type signalWatch struct {
	mu                 sync.Mutex
	labels, conditions int
	// rewrites are condition writes that changed only its heartbeat.
	rewrites int
	// other are the events that were not a Node's change.
	other     []string
	last      map[string]nodeSignals
	stopWatch func()
}

// nodeSignals is what the agent writes on one Node.
type nodeSignals struct{ labels, condition, heartbeat string }

func signalsOf(node *corev1.Node) nodeSignals {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(node.Labels)) {
		if warmv1.IsNodeLabelKey(k) {
			keys = append(keys, k+"="+node.Labels[k])
		}
	}
	s := nodeSignals{labels: strings.Join(keys, ",")}
	for _, c := range node.Status.Conditions {
		if c.Type == warmv1.ConditionImagesWarm {
			s.condition = string(c.Status) + "/" + c.Reason + "/" + c.Message
			s.heartbeat = c.LastHeartbeatTime.String()
		}
	}
	return s
}

// watchSignals starts a signalWatch: a list of the Nodes is the
// baseline, then a watch from its resourceVersion, started again from
// the last one seen whenever the API server ends it.
func watchSignals(b *testing.B, cp *testbed.ControlPlane) *signalWatch {
	b.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	sw := &signalWatch{last: map[string]nodeSignals{}}
	for i := range list.Items {
		sw.last[list.Items[i].Name] = signalsOf(&list.Items[i])
	}
	done := make(chan struct{})
	sw.stopWatch = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for rv := list.ResourceVersion; ctx.Err() == nil; {
			w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			rv = sw.follow(ctx, w)
		}
	}()
	b.Cleanup(sw.stopWatch)
	return sw
}

// follow counts one watch's changes until it ends, and returns the last
// resourceVersion it saw.
func (sw *signalWatch) follow(ctx context.Context, w watch.Interface) string {
	defer w.Stop()
	var rv string
	for ev := range w.ResultChan() {
		if ctx.Err() != nil {
			break // stopped: the client's own cancellation arrives as an error
		}
		node, ok := ev.Object.(*corev1.Node)
		if !ok || ev.Type == watch.Deleted {
			sw.mu.Lock()
			sw.other = append(sw.other, fmt.Sprintf("%s %+v", ev.Type, ev.Object))
			sw.mu.Unlock()
			continue
		}
		rv = node.ResourceVersion
		sw.observe(node)
	}
	return rv
}

func (sw *signalWatch) observe(node *corev1.Node) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	now, was := signalsOf(node), sw.last[node.Name]
	sw.last[node.Name] = now
	if now.labels != was.labels {
		sw.labels++
	}
	switch {
	case now.condition != was.condition:
		sw.conditions++
	case now.heartbeat != was.heartbeat:
		sw.rewrites++
	}
}

// labelled counts the nodes that carry key, as listed now.
func labelled(b *testing.B, cp *testbed.ControlPlane, key string) int {
	var nodes corev1.NodeList
	if err := cp.Client.List(context.Background(), &nodes, client.HasLabels{key}); err != nil {
		b.Fatal(err)
	}
	return len(nodes.Items)
}

// labelled counts the nodes that carry key, as the watch saw them.
func (sw *signalWatch) labelled(key string) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	n := 0
	for _, s := range sw.last {
		if strings.Contains(","+s.labels+",", ","+key+"="+warmv1.NodeLabelValue+",") {
			n++
		}
	}
	return n
}

// stop ends the watch and returns the changes it counted, and the
// condition's rewrites.
func (sw *signalWatch) stop() (labels, conditions, rewrites int) {
	sw.stopWatch()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.labels, sw.conditions, sw.rewrites
}
