package imagewarm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func iwMinReady(iw *warmv1.ImageWarm, v intstr.IntOrString) *warmv1.ImageWarm {
	iw.Spec.Readiness = &warmv1.Readiness{MinReadyNodes: &v}
	return iw
}

// iwFleetOf is n nodes named node-00..; the first ready of them report
// nginx present, the next platform lack its platform, the next failed
// fail with NotFound, and the rest do not report.
func iwFleetOf(n, ready, platform, failed int) ([]metav1.PartialObjectMetadata, []warmv1.NodeWarm) {
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, iwNodeMeta(name))
		switch {
		case i < ready:
			reports = append(reports, iwReport(name, iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)))
		case i < ready+platform:
			reports = append(reports, iwReport(name, iwWebAt(1), iwFailing("nginx", warmv1.ImageBackOff, "NoMatchingPlatform", "no match for platform in manifest")))
		case i < ready+platform+failed:
			reports = append(reports, iwReport(name, iwWebAt(1), iwFailing("nginx", warmv1.ImageBackOff, "NotFound", "not found")))
		}
	}
	return nodes, reports
}

// TestReadiness checks what Ready means with spec.readiness and nodes
// that cannot hold an image: a fleet with a silent node or a node of the
// wrong platform can be Ready.
func TestReadiness(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	pct := intstr.FromString
	num := func(v int) intstr.IntOrString { return intstr.FromInt32(int32(v)) }
	cases := []struct {
		name                       string
		min                        *intstr.IntOrString
		n, ready, platform, failed int
		counts                     warmv1.NodeCounts
		want                       iwWantCond
		message                    []string
	}{
		{name: "unsupported nodes do not block Ready", n: 4, ready: 3, platform: 1,
			counts:  warmv1.NodeCounts{Matching: 4, Ready: 3, Unsupported: 1},
			want:    iwWantCond{T, warmv1.ReasonAllNodesWarm},
			message: []string{"3/3 matching nodes", "1 cannot hold an image"}},
		{name: "one silent node blocks Ready by default", n: 10, ready: 9,
			counts:  warmv1.NodeCounts{Matching: 10, Ready: 9, NotReporting: 1},
			want:    iwWantCond{F, warmv1.ReasonNotReporting},
			message: []string{"1/10 matching nodes have not reported on generation 1, or their agent is down: node-09"}},
		{name: "90% met with one silent node", min: ptrTo(pct("90%")), n: 10, ready: 9,
			counts:  warmv1.NodeCounts{Matching: 10, Ready: 9, NotReporting: 1},
			want:    iwWantCond{T, warmv1.ReasonMinReadyNodesMet},
			message: []string{"9/10", "minReadyNodes 90%: 9 needed", "1 not reporting: node-09"}},
		{name: "percentages round up", min: ptrTo(pct("85%")), n: 10, ready: 8,
			counts:  warmv1.NodeCounts{Matching: 10, Ready: 8, NotReporting: 2},
			want:    iwWantCond{F, warmv1.ReasonNotReporting},
			message: []string{"9 needed", "node-08, node-09"}},
		{name: "a number of nodes", min: ptrTo(num(2)), n: 5, ready: 2, failed: 1,
			counts:  warmv1.NodeCounts{Matching: 5, Ready: 2, Failed: 1, NotReporting: 2},
			want:    iwWantCond{T, warmv1.ReasonMinReadyNodesMet},
			message: []string{"2 needed"}},
		{name: "percentage of the counted nodes only", min: ptrTo(pct("100%")), n: 3, ready: 2, platform: 1,
			counts: warmv1.NodeCounts{Matching: 3, Ready: 2, Unsupported: 1},
			want:   iwWantCond{T, warmv1.ReasonAllNodesWarm}},
		{name: "more than can be met", min: ptrTo(num(5)), n: 4, ready: 3, platform: 1,
			counts:  warmv1.NodeCounts{Matching: 4, Ready: 3, Unsupported: 1},
			want:    iwWantCond{F, warmv1.ReasonTooFewNodes},
			message: []string{"asks for 5 nodes; only 3"}},
		{name: "every node of the wrong platform", n: 2, platform: 2,
			counts: warmv1.NodeCounts{Matching: 2, Unsupported: 2},
			want:   iwWantCond{F, warmv1.ReasonNoSupportedNodes}},
		{name: "failures still count", min: ptrTo(pct("50%")), n: 4, ready: 1, failed: 3,
			counts: warmv1.NodeCounts{Matching: 4, Ready: 1, Failed: 3},
			want:   iwWantCond{F, warmv1.ReasonNodesFailed}},
		{name: "many silent nodes are named a few at a time", n: 20,
			counts:  warmv1.NodeCounts{Matching: 20, NotReporting: 20},
			want:    iwWantCond{F, warmv1.ReasonNotReporting},
			message: []string{"node-00, node-01, node-02 and 17 more"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iw := iwNewWarm(1, nil, "nginx")
			if c.min != nil {
				iwMinReady(iw, *c.min)
			}
			nodes, reports := iwFleetOf(c.n, c.ready, c.platform, c.failed)
			st, err := aggregateStatus(iw, newFleet(nodes, reports))
			if err != nil {
				t.Fatal(err)
			}
			if st.Nodes != c.counts {
				t.Errorf("nodes = %+v, want %+v", st.Nodes, c.counts)
			}
			iwCheckCondition(t, st, warmv1.ConditionReady, c.want, 1)
			msg := meta.FindStatusCondition(st.Conditions, warmv1.ConditionReady).Message
			for _, m := range c.message {
				if !strings.Contains(msg, m) {
					t.Errorf("Ready message %q lacks %q", msg, m)
				}
			}
			if len(st.Failures) != c.failed {
				t.Errorf("%d failures listed, want %d (a platform lack is not a failure)", len(st.Failures), c.failed)
			}
			if c.platform > 0 && st.Images[0].Unsupported != int32(c.platform) {
				t.Errorf("image unsupported = %d, want %d", st.Images[0].Unsupported, c.platform)
			}
		})
	}
}

// TestSilentNodes checks the silent-node list: bounded, by name, each
// dated from the later of the generation's arrival and the node's
// creation, and the arrival kept across reconciles of one generation.
func TestSilentNodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	iw := iwNewWarm(1, nil, "nginx")
	nodes, reports := iwFleetOf(15, 2, 0, 0)
	late := metav1.NewTime(t0.Add(time.Hour))
	nodes[14].CreationTimestamp = late // node-14 joined after the generation
	nodes[3].CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	f := newFleet(nodes, reports)
	f.now = t0
	st, err := aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SilentNodes) != warmv1.MaxReportedSilentNodes || st.SilentNodes[0].Node != "node-02" || st.SilentNodes[9].Node != "node-11" {
		t.Fatalf("silent nodes %+v", st.SilentNodes)
	}
	if !st.SilentNodes[1].Since.Time.Equal(t0) {
		t.Errorf("node-03 silent since %v, want the generation's arrival %v", st.SilentNodes[1].Since, t0)
	}
	if st.ObservedGenerationTime == nil || !st.ObservedGenerationTime.Time.Equal(t0) {
		t.Errorf("observedGenerationTime %v, want %v", st.ObservedGenerationTime, t0)
	}

	// An hour later, the same generation: the arrival is kept; node-14
	// joined late, so it is dated from its creation.
	iw.Status = st
	f.now = t0.Add(2 * time.Hour)
	reports = reports[:0]
	for i := range 12 { // node-00..node-11 report now
		reports = append(reports, iwReport(nodes[i].Name, iwWebAt(1), iwImg("nginx", warmv1.ImagePresent)))
	}
	f = newFleet(nodes, reports)
	f.now = t0.Add(2 * time.Hour)
	st, err = aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SilentNodes) != 3 || st.SilentNodes[2].Node != "node-14" {
		t.Fatalf("silent nodes %+v", st.SilentNodes)
	}
	if !st.SilentNodes[0].Since.Time.Equal(t0) || !st.SilentNodes[2].Since.Time.Equal(late.Time) {
		t.Errorf("since %v and %v, want %v and %v", st.SilentNodes[0].Since, st.SilentNodes[2].Since, t0, late)
	}

	// A new generation is dated afresh.
	iw.Status, iw.Generation = st, 2
	st, err = aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	if !st.ObservedGenerationTime.Time.Equal(f.now) || len(st.SilentNodes) != 10 || !st.SilentNodes[0].Since.Time.Equal(f.now) {
		t.Errorf("after a new generation: observed %v, silent %+v", st.ObservedGenerationTime, st.SilentNodes)
	}
}

func ptrTo[T any](v T) *T { return &v }
