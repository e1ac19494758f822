package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// failingImages and missingImages shape the failing fleet's ImageWarm:
// a hundred images, half of which the registry does not have (issue 23).
const (
	failingImages = 100
	missingImages = 50
)

// BenchmarkFailingFleet runs BENCH_FAIL simulated agents (default 100;
// 1,000 under BENCH_FULL) on one ImageWarm of 100 images of which 50 do
// not exist, for BENCH_FAIL_WINDOW (default 1m; 5m under BENCH_FULL), and
// counts what the failures cost: the Event objects about the ImageWarm
// and the API writes a minute, while the missing images are retried with
// back-off. Failures fold per ImageWarm and node, so Event objects grow
// with the nodes, not with nodes x images.
func BenchmarkFailingFleet(b *testing.B) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel))) // as BenchmarkScale
	n := 100
	window := time.Minute
	if full() {
		n, window = 1000, 5*time.Minute
	}
	if v := os.Getenv("BENCH_FAIL"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("BENCH_FAIL=%q is not a number of nodes", v)
		}
	}
	window = envDuration(b, "BENCH_FAIL_WINDOW", window)
	b.Run(fmt.Sprintf("images=%d/missing=%d/N=%d", failingImages, missingImages, n), func(b *testing.B) {
		for b.Loop() {
			runFailing(b, n, window)
		}
	})
}

// missingRef says whether ref is one of the failing fleet's missing
// images.
func missingRef(ref string) bool { return strings.Contains(ref, "/scale/missing") }

func runFailing(b *testing.B, n int, window time.Duration) {
	ctx := context.Background()
	sim := startSimFleet(b, n, scale.Options{PullLatency: scalePullLatency, Missing: missingRef}, fleetPlane{})
	refs := make([]string, 0, failingImages)
	for i := range failingImages - missingImages {
		refs = append(refs, fmt.Sprintf("127.0.0.1:5000/scale/app%d:v1", i))
	}
	for i := range missingImages {
		refs = append(refs, fmt.Sprintf("127.0.0.1:5000/scale/missing%d:v1", i))
	}
	before := apiMetrics(b, sim.cp.Config)
	if err := sim.cp.Client.Create(ctx, build.ImageWarm("default", "failing", build.Images(refs...))); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(window)
	// The window ends with the agents: at 1,000 nodes their retries kept
	// the two cores so busy that the API server's /metrics, read while
	// they ran, did not answer (issue 23). What they wrote in the window
	// is in the counters; a write in flight when they stop counts too.
	minutes := time.Since(start).Minutes()
	_ = sim.agents.Stop() // its errors are logged at clean-up, which stops it again
	after := apiMetrics(b, sim.cp.Config)
	sim.checkAnswers(b, after)

	var iw warmv1.ImageWarm
	if err := sim.cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "failing"}, &iw); err != nil {
		b.Fatal(err)
	}
	// Every node should report its failures within the window; one whose
	// writes the API server could not take is counted, not fatal: that
	// is what the run is for.
	failing := int(iw.Status.Nodes.Failed)
	if failing == 0 {
		b.Fatalf("after %v no node reports a failure: %+v", window, iw.Status.Nodes)
	}
	objects, occurrences := imageWarmEvents(b, sim.cp, "failing")
	writes := writesByResource(before, after)
	var total float64
	for _, v := range writes {
		total += v
	}
	fmt.Printf("\nFailing fleet: %d simulated agents, one ImageWarm of %d images of which %d are missing, for %v\n",
		n, failingImages, missingImages, window)
	fmt.Printf("nodes reporting failures at the end: %d of %d; Event objects about it: %d (%.2f a node), %d occurrences; writes: events %.0f, nodewarms/status %.0f, imagewarms/status %.0f, all %.0f (%.0f a minute); 429 answers %.0f\n\n",
		failing, n, objects, float64(objects)/float64(n), occurrences, writes["events"], writes["nodewarms/status"], writes["imagewarms/status"], total, total/minutes,
		sumSamples(after, "apiserver_request_total", `code="429"`)-sumSamples(before, "apiserver_request_total", `code="429"`))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(failing), "nodes-failing")
	b.ReportMetric(float64(objects), "event-objects")
	b.ReportMetric(float64(objects)/float64(n), "event-objects/node")
	b.ReportMetric(writes["events"]/minutes, "event-writes/min")
	b.ReportMetric(writes["nodewarms/status"]/minutes, "nw-writes/min")
	b.ReportMetric(total/minutes, "writes/min")
}

// imageWarmEvents counts the Event objects about the named ImageWarm of
// the default namespace, and the occurrences they stand for (a series
// counts each of its occurrences).
func imageWarmEvents(b *testing.B, cp *testbed.ControlPlane, name string) (objects, occurrences int) {
	b.Helper()
	var list eventsv1.EventList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		b.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind != "ImageWarm" || e.Regarding.Name != name {
			continue
		}
		objects++
		occurrences++
		if e.Series != nil {
			occurrences += int(e.Series.Count) - 1
		}
	}
	return objects, occurrences
}
