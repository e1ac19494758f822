package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/test/scale"
	"github.com/warmer-dev/warmer/test/testbed"
)

// policyResult is what one fleet of BenchmarkPolicyCost measured, from
// the agents' start until every node was warm and untainted.
type policyResult struct {
	policies bool
	done     time.Duration // every NodeWarm, the ImageWarm Ready, every taint gone
	apiCPU   time.Duration
	// nodeWarmWrite and nodePatch are the API server's mean time over a
	// NodeWarm status write and a Node patch (queueing and admission
	// included); writes and patches count them.
	nodeWarmWrite, nodePatch time.Duration
	writes, patches          float64
	// nodeWarmSLI and nodePatchSLI are the same without the wait in
	// priority and fairness's queue (apiserver_request_sli_duration_seconds);
	// queued is the mean wait of a request of the agents' priority level.
	nodeWarmSLI, nodePatchSLI, queued time.Duration
	// eventCreate is the mean time of the agents' event creations, which
	// no policy matches: a control, for the machine's own noise.
	eventCreate time.Duration
	// admissions are the requests the API server's
	// ValidatingAdmissionPolicy plugin validated (every write, whether a
	// policy matches it or not), admissionTime their mean time in it and
	// admissionTotal the sum.
	admissions                    float64
	admissionTime, admissionTotal time.Duration
	// answers403 and answers422 are the refusals the agents' clients
	// counted (a run with any fails).
	answers403, answers422 int
}

// BenchmarkPolicyCost tells what config/policy's admission policies cost
// the API server: the same fleet, with the shipped roles, once with the
// policies and once without, in alternating order (the machine is
// shared). Each fleet is N simulated agents joining on Nodes registered
// with the startup taint while one ImageWarm of ten images asks to hold
// it, so that both writes the policies check happen: each agent creates
// and writes its NodeWarm's status (warmer-agent-own-nodewarm) and
// patches the taint off its Node (warmer-agent-own-node-taint). N is 100,
// 1,000 under BENCH_FULL (BENCH_POLICY_N); BENCH_POLICY_PAIRS pairs, 2 by
// default, 1 under BENCH_FULL. The last sub-benchmark gives the ratios of
// the medians, with policies over without; the agents' event creations,
// which no policy matches, are the control for the machine's own noise.
func BenchmarkPolicyCost(b *testing.B) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel))) // as BenchmarkScale
	raiseFileLimit(b)
	n, pairs := 100, 2
	if full() {
		n, pairs = 1000, 1
	}
	n, pairs = envInt(b, "BENCH_POLICY_N", n), envInt(b, "BENCH_POLICY_PAIRS", pairs)
	var on, off []policyResult
	for pair := range pairs {
		// ABBA: a drift of the machine's speed weighs on both sides.
		order := []bool{true, false}
		if pair%2 == 1 {
			order = []bool{false, true}
		}
		for _, policies := range order {
			b.Run(fmt.Sprintf("N=%d/policies=%v/pair=%d", n, policies, pair), func(b *testing.B) {
				for b.Loop() {
					r := runPolicyFleet(b, n, policies)
					reportPolicy(b, r)
					if policies {
						on = append(on, r)
					} else {
						off = append(off, r)
					}
				}
			})
		}
	}
	if len(on) == 0 || len(off) == 0 {
		return // a round failed, and said why
	}
	b.Run(fmt.Sprintf("N=%d/with-over-without", n), func(b *testing.B) {
		for b.Loop() {
		}
		reportPolicyRatios(b, on, off)
	})
}

// runPolicyFleet runs one fleet with or without config/policy.
func runPolicyFleet(b *testing.B, n int, policies bool) policyResult {
	ctx := context.Background()
	iw := fleetWarm(scaleCase{n: n, images: 10})
	iw.Spec.StartupTaint = true
	plane := fleetPlane{withoutPolicies: !policies, joining: true, before: func(cp *testbed.ControlPlane) {
		// The policies leave startupTaint to namespaces an operator
		// marked; without them the label changes nothing.
		cp.AllowClusterLevers(b, "default")
		if err := cp.Client.Create(ctx, iw); err != nil {
			b.Fatal(err)
		}
	}}
	// The window opens as the agents start (the fleet's setup metrics)
	// and ends once every node is warm and untainted.
	sim := startSimFleet(b, n, scale.Options{PullLatency: scalePullLatency}, plane)
	eventually(b, 10*time.Minute, fmt.Sprintf("%d nodes warm and untainted", n), func() error {
		sim.failIfRefused(b)
		return fleetWarmAndUntainted(ctx, sim.cp, n)
	})
	r := policyResult{policies: policies, done: time.Since(sim.started)}
	time.Sleep(3 * time.Second) // trailing writes belong to the warm
	after := apiMetrics(b, sim.cp.Config)
	r.answers403, r.answers422 = sim.checkAnswers(b, after)
	before := sim.setup
	r.apiCPU = time.Duration((sumSamples(after, "process_cpu_seconds_total") - sumSamples(before, "process_cpu_seconds_total")) * float64(time.Second))
	nw := []string{`resource="nodewarms"`, `subresource="status"`}
	patch := []string{`resource="nodes"`, `verb="PATCH"`} // the agents patch only Nodes (no subresource)
	r.nodeWarmWrite = meanOf(before, after, "apiserver_request_duration_seconds", nw...)
	r.nodePatch = meanOf(before, after, "apiserver_request_duration_seconds", patch...)
	r.nodeWarmSLI = meanOf(before, after, "apiserver_request_sli_duration_seconds", nw...)
	r.nodePatchSLI = meanOf(before, after, "apiserver_request_sli_duration_seconds", patch...)
	r.eventCreate = meanOf(before, after, "apiserver_request_duration_seconds", `resource="events"`, `verb="POST"`)
	r.queued = meanOf(before, after, "apiserver_flowcontrol_request_wait_duration_seconds", `priority_level="warmer-agents"`)
	r.writes = increase(before, after, "apiserver_request_duration_seconds_count", nw...)
	r.patches = increase(before, after, "apiserver_request_duration_seconds_count", patch...)
	// The API server counts a policy's evaluations only when they fail,
	// so the plugin's own time is what tells the policies' cost apart.
	vap := []string{`name="ValidatingAdmissionPolicy"`, `type="validate"`}
	r.admissions = increase(before, after, "apiserver_admission_controller_admission_duration_seconds_count", vap...)
	r.admissionTime = meanOf(before, after, "apiserver_admission_controller_admission_duration_seconds", vap...)
	r.admissionTotal = time.Duration(increase(before, after, "apiserver_admission_controller_admission_duration_seconds_sum", vap...) * float64(time.Second))
	if r.patches < float64(n) {
		b.Fatalf("%v Node patches for %d tainted nodes: the startup taint was not removed by the agents", r.patches, n)
	}
	var bindings admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	if err := sim.cp.Client.List(ctx, &bindings); err != nil {
		b.Fatal(err)
	}
	if policies != (len(bindings.Items) > 0) {
		b.Fatalf("fleet with policies %v has %d admission policy bindings", policies, len(bindings.Items))
	}
	return r
}

// fleetWarmAndUntainted says nil once the fleet's ImageWarm is Ready on
// all n nodes and no Node keeps the startup taint.
func fleetWarmAndUntainted(ctx context.Context, cp *testbed.ControlPlane, n int) error {
	var iw warmv1.ImageWarm
	if err := cp.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "fleet"}, &iw); err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) || int(iw.Status.Nodes.Ready) != n {
		time.Sleep(200 * time.Millisecond)
		return fmt.Errorf("ImageWarm not Ready on every node: %+v", iw.Status.Nodes)
	}
	var nodes corev1.NodeList
	if err := cp.Client.List(ctx, &nodes); err != nil {
		return err
	}
	tainted := 0
	for i := range nodes.Items {
		if hasStartupTaint(&nodes.Items[i]) {
			tainted++
		}
	}
	if tainted > 0 {
		time.Sleep(200 * time.Millisecond)
		return fmt.Errorf("%d of %d Nodes keep the startup taint", tainted, len(nodes.Items))
	}
	return nil
}

func hasStartupTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == agent.DefaultStartupTaintKey {
			return true
		}
	}
	return false
}

// increase is how much the samples of metric whose labels hold every
// fragment grew between two scrapes.
func increase(before, after map[string]float64, metric string, fragments ...string) float64 {
	return sumSamples(after, metric, fragments...) - sumSamples(before, metric, fragments...)
}

func reportPolicy(b *testing.B, r policyResult) {
	b.Helper()
	fmt.Printf("\nPolicy cost, admission policies %v: every node warm and untainted %.2fs after the agents were up; API server CPU %.2fs from the agents' start; "+
		"%.0f NodeWarm status writes, %.1f ms each (%.1f ms less queueing); %.0f Node patches, %.1f ms each (%.1f ms less queueing); "+
		"the agents' requests queued %.1f ms on average; an event's creation (no policy matches it) took %.1f ms; %.0f writes through the ValidatingAdmissionPolicy plugin, %.0f µs each, %.3fs in all\n\n",
		r.policies, r.done.Seconds(), r.apiCPU.Seconds(), r.writes, ms(r.nodeWarmWrite), ms(r.nodeWarmSLI), r.patches, ms(r.nodePatch), ms(r.nodePatchSLI),
		ms(r.queued), ms(r.eventCreate), r.admissions, us(r.admissionTime), r.admissionTotal.Seconds())
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.apiCPU.Seconds(), "api-cpu-s")
	b.ReportMetric(ms(r.nodeWarmWrite), "nw-write-ms")
	b.ReportMetric(ms(r.nodePatch), "node-patch-ms")
	b.ReportMetric(ms(r.nodeWarmSLI), "nw-write-sli-ms")
	b.ReportMetric(ms(r.nodePatchSLI), "node-patch-sli-ms")
	b.ReportMetric(ms(r.queued), "queued-ms")
	b.ReportMetric(ms(r.eventCreate), "event-post-ms")
	b.ReportMetric(r.writes, "nw-writes")
	b.ReportMetric(r.patches, "node-patches")
	b.ReportMetric(r.admissions, "vap-admissions")
	b.ReportMetric(us(r.admissionTime), "vap-us")
	b.ReportMetric(r.admissionTotal.Seconds(), "vap-s")
	b.ReportMetric(r.done.Seconds(), "done-s")
	b.ReportMetric(float64(r.answers403), "answers-403")
	b.ReportMetric(float64(r.answers422), "answers-422")
}

// reportPolicyRatios reports, with policies over without, the ratios of
// the rounds' medians.
func reportPolicyRatios(b *testing.B, on, off []policyResult) {
	b.Helper()
	for _, m := range []struct {
		unit string
		of   func(policyResult) float64
	}{
		{"api-cpu/without", func(r policyResult) float64 { return r.apiCPU.Seconds() }},
		{"nw-write/without", func(r policyResult) float64 { return ms(r.nodeWarmWrite) }},
		{"node-patch/without", func(r policyResult) float64 { return ms(r.nodePatch) }},
		{"vap/without", func(r policyResult) float64 { return us(r.admissionTime) }},
		{"event-post/without", func(r policyResult) float64 { return ms(r.eventCreate) }},
		{"done/without", func(r policyResult) float64 { return r.done.Seconds() }},
	} {
		with, without := median(mapOf(on, m.of)), median(mapOf(off, m.of))
		fmt.Printf("with policies over without, %s: %.3f (medians %.3f, %.3f of %d and %d rounds)\n", m.unit, with/without, with, without, len(on), len(off))
		b.ReportMetric(with/without, m.unit)
	}
	b.ReportMetric(0, "ns/op")
}

func mapOf(rs []policyResult, f func(policyResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// envInt reads a positive count from the environment, with a default.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}
