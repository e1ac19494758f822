package warmerctl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func imageWarm(ns, name string) *warmv1.ImageWarm {
	return &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Status: warmv1.ImageWarmStatus{ObservedGeneration: 1}}
}

// nodeWarm lists one image of ns/name in the given state.
func nodeWarm(node, ns, name string, img warmv1.NodeImage) warmv1.NodeWarm {
	img.Warms = []int32{0}
	return warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: warmv1.NodeWarmStatus{
		Warms:  []warmv1.WarmRef{{Namespace: ns, Name: name, Generation: 1}},
		Images: []warmv1.NodeImage{img},
	}}
}

func pulling(done, total, secs int64) warmv1.NodeImage {
	p := &warmv1.PullProgress{BytesDone: done, BytesTotal: total}
	if secs >= 0 {
		p.SecondsLeft = ptr.To(secs)
	}
	return warmv1.NodeImage{Image: "r/a:1", State: warmv1.ImagePulling, Progress: p}
}

func TestSummariseSlowestFirst(t *testing.T) {
	iw := imageWarm("ns", "w")
	nws := []warmv1.NodeWarm{
		nodeWarm("fast", "ns", "w", pulling(90, 100, 5)),
		nodeWarm("done", "ns", "w", warmv1.NodeImage{Image: "r/a:1", State: warmv1.ImagePresent}),
		nodeWarm("slow", "ns", "w", pulling(10, 100, 300)),
		nodeWarm("norate", "ns", "w", pulling(0, 100, -1)),
		nodeWarm("failed", "ns", "w", warmv1.NodeImage{Image: "r/a:1", State: warmv1.ImageBackOff, Reason: "NotFound", Message: "not found", Attempts: 3}),
		nodeWarm("other", "ns", "x", pulling(0, 1000, 900)),
	}
	s := Summarise(iw, nws)
	var order []string
	for _, n := range s.Working {
		order = append(order, n.Node)
	}
	if got, want := strings.Join(order, ","), "slow,fast,norate,failed"; got != want {
		t.Errorf("order %s, want %s (longest time left first, then bytes left, the other ImageWarm's node left out)", got, want)
	}
	if s.Warm != 1 || s.Bytes != (Bytes{Done: 100, Total: 300}) || *s.SecondsLeft != 300 {
		t.Errorf("warm %d, bytes %+v, left %v; want 1, 100 of 300, 300", s.Warm, s.Bytes, *s.SecondsLeft)
	}
	if len(s.Failures) != 1 || s.Failures[0].Reason != "NotFound" || !s.Failures[0].BackingOff || s.Failures[0].Attempts != 3 {
		t.Errorf("failures %+v", s.Failures)
	}
}

func TestStatusFitsTheScreen(t *testing.T) {
	iw := imageWarm("ns", "w")
	iw.Status.Nodes = warmv1.NodeCounts{Matching: 5000, Pulling: 5000}
	var nws []warmv1.NodeWarm
	for i := range 5000 {
		nws = append(nws, nodeWarm(fmt.Sprintf("node-%04d", i), "ns", "w", pulling(int64(i), 10000, int64(i))))
	}
	s := Summarise(iw, nws)
	for _, lines := range []int{10, DefaultLines, 60} {
		var b bytes.Buffer
		if err := RenderStatus(&b, s, Screen{Lines: lines, Bars: NewBars(false)}); err != nil {
			t.Fatal(err)
		}
		out := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(out) > lines {
			t.Errorf("%d lines for a screen of %d:\n%s", len(out), lines, b.String())
		}
		if !strings.Contains(out[3], "node-4999") || !strings.Contains(out[len(out)-1], "more nodes: ") {
			t.Errorf("want the slowest node first and the rest summed up last:\n%s", b.String())
		}
	}
}

func TestPlainHasNoEscapes(t *testing.T) {
	b := NewBars(false)
	for _, s := range []string{b.Overall(0.5), b.Node(0.3)} {
		if strings.ContainsRune(s, '\x1b') || !strings.Contains(s, "#") {
			t.Errorf("plain bar %q: want # and no escape sequence", s)
		}
	}
	if c := NewBars(true).Node(0.5); !strings.ContainsRune(c, '\x1b') {
		t.Errorf("coloured bar %q has no colour", c)
	}
}

// TestEveryPullFailureExplained holds why's words to the reference: every
// reason a pull can fail with has a meaning and something to do, read
// from conditions.go.
func TestEveryPullFailureExplained(t *testing.T) {
	for _, r := range warmv1.PullFailureReasons {
		w, ok := ReasonWords(r)
		if !ok || w.Meaning == "" || w.Action == "" {
			t.Errorf("%s: %+v, known %v; want a meaning and what to do in conditions.go", r, w, ok)
		}
		if strings.Contains(w.Meaning, "What to do") {
			t.Errorf("%s: meaning %q holds what to do", r, w.Meaning)
		}
	}
	for _, r := range []string{warmv1.ReasonNotReporting, warmv1.ReasonWaves, warmv1.ReasonAboveThreshold, warmv1.ReasonRuntimePulling, warmv1.ReasonSuspended} {
		if w, _ := ReasonWords(r); w.Action == "" {
			t.Errorf("%s has nothing to do", r)
		}
	}
}

func TestWhyReadyIsOneLine(t *testing.T) {
	iw := imageWarm("ns", "w")
	iw.Status.Conditions = []metav1.Condition{{Type: warmv1.ConditionReady, Status: metav1.ConditionTrue, Reason: warmv1.ReasonAllNodesWarm}}
	var b bytes.Buffer
	if err := RenderWhy(&b, Explain(Summarise(iw, nil))); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "\n"); got != 1 || !strings.Contains(b.String(), "is Ready") {
		t.Errorf("Ready: %q, want one line", b.String())
	}
}

// TestStatusShowsUnpacking: a node whose pulls have every byte in and
// unpack says so on its row, instead of a download rate.
func TestStatusShowsUnpacking(t *testing.T) {
	img := pulling(100, 100, 20) // every byte in: unpacking
	s := Summarise(imageWarm("ns", "w"), []warmv1.NodeWarm{nodeWarm("big", "ns", "w", img)})
	if len(s.Working) != 1 || s.Working[0].PullPhase != warmv1.PullPhaseUnpacking {
		t.Fatalf("working %+v, want the node unpacking", s.Working)
	}
	row := nodeRow(s.Working[0], 3, Bars{})
	if !strings.Contains(row, "unpacking, 20s left") {
		t.Errorf("row %q, want it to say unpacking and the time left", row)
	}
}
