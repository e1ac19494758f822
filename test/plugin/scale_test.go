package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/warmerctl"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// fleetNodes is how many simulated nodes' NodeWarms the scale test writes.
const fleetNodes = 1000

// answerWithin is what the issue asks of one command over the fleet.
const answerWithin = 2 * time.Second

// createFleet writes ImageWarm shop/fleet and n NodeWarms pulling it, the
// slowest node-0999 (seconds left grow with the index).
func createFleet(t testing.TB, cp *testbed.ControlPlane, n int) {
	t.Helper()
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 2000, 2000 // the fixture's writes, not the plugin's reads
	c, err := client.New(&cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shop}}); err != nil {
		t.Fatal(err)
	}
	iw := build.ImageWarm(shop, "fleet", build.Images(web))
	createWithStatus(t, c, iw, func() {
		iw.Status = warmv1.ImageWarmStatus{ObservedGeneration: 1, ImageCount: 1,
			Nodes:      warmv1.NodeCounts{Matching: int32(n), Pulling: int32(n)},
			Conditions: []metav1.Condition{cond(warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonPulling, "pulling")}}
	})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				img := pullingImage(web, int64(i%100), 100, ptr.To(int64(i)))
				nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i)}}
				status := warmv1.NodeWarmStatus{Warms: []warmv1.WarmRef{{Namespace: shop, Name: "fleet", Generation: 1}},
					Images: []warmv1.NodeImage{img}, Desired: 1, Pulling: 1}
				if err := writeWithStatus(c, nw, func() { nw.Status = status }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// TestThousandNodes: status over 1,000 nodes stays one screen, slowest
// node first and the rest summed up, and why names a few nodes, not all.
// How long it takes is logged here and asserted in BenchmarkStatusFleet.
func TestThousandNodes(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	grantViewer(t, cp, viewer)
	createFleet(t, cp, fleetNodes)
	start := time.Now()
	out, err := run(t, cp, viewer, "status", "fleet", "-n", shop)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status over %d NodeWarms answered in %v:\n%s", fleetNodes, took.Round(time.Millisecond), out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != warmerctl.DefaultLines {
		t.Errorf("%d lines, want exactly one screen of %d", len(lines), warmerctl.DefaultLines)
	}
	if !strings.HasPrefix(lines[3], "node-0999 ") {
		t.Errorf("first node row %q, want the slowest, node-0999", lines[3])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "more nodes: ") || !strings.Contains(last, "pulling") {
		t.Errorf("last line %q, want the rest summed up", last)
	}
	why, err := run(t, cp, viewer, "why", "fleet", "-n", shop)
	if err != nil || strings.Count(why, "\n") > 10 || !strings.Contains(why, "1000 nodes") {
		t.Errorf("why over %d nodes (%v):\n%s", fleetNodes, err, why)
	}
}

// BenchmarkStatusFleet times status over 1,000 NodeWarms (one ImageWarm
// GET and a paged List as warmer-viewer) and fails past 2 s a run.
func BenchmarkStatusFleet(b *testing.B) {
	cp := testbed.StartControlPlane(b)
	grantViewer(b, cp, viewer)
	createFleet(b, cp, fleetNodes)
	b.ResetTimer()
	for b.Loop() {
		if _, err := run(b, cp, viewer, "status", "fleet", "-n", shop); err != nil {
			b.Fatal(err)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/status")
	if per > answerWithin {
		b.Fatalf("status over %d nodes took %v, want within %v", fleetNodes, per, answerWithin)
	}
}
