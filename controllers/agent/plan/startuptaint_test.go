package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// taintCase is one startup-taint decision.
type taintCase struct {
	name   string
	in     func() Input
	remove bool
	// status and reason of the StartupTaint condition; "" for none.
	status metav1.ConditionStatus
	reason string
	// events are "Reason" of the taint's events, with "+node" when also on
	// the Node, and the ImageWarms they go on.
	events []string
	// next, when set, bounds the next pass.
	next time.Duration
}

// tainted is a pass on a node carrying the startup taint, 10 minutes
// from its deadline.
// testTaintKey is the startup taint key the tests use (the agent's default).
const testTaintKey = "warmer.dev/warming"

func tainted(warms ...warmv1.ImageWarm) Input {
	in := input(warms...)
	in.Taint = TaintInput{Key: testTaintKey, OnNode: true, Deadline: t0.Add(10 * time.Minute)}
	return in
}

func holding(iw warmv1.ImageWarm) warmv1.ImageWarm {
	iw.Spec.StartupTaint = true
	return iw
}

func TestPlanStartupTaint(t *testing.T) {
	gate := holding(warm("ns", "gate", nil, imgA))
	plain := warm("ns", "plain", nil, imgB)
	paused := holding(warm("ns", "paused", nil, imgA))
	paused.Spec.Suspend = true
	elsewhere := holding(warm("ns", "elsewhere", map[string]warmv1.LabelValue{"pool": "gpu"}, imgA))
	prev := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: warmv1.ConditionStartupTaint, Status: status, Reason: reason, Message: "before", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	}

	cases := []taintCase{{
		name: "off: no key, the taint is not the agent's business",
		in: func() Input {
			in := tainted(gate)
			in.Taint.Key = ""
			return in
		},
	}, {
		name: "never tainted: no condition",
		in: func() Input {
			in := tainted(gate)
			in.Taint.OnNode = false
			return in
		},
	}, {
		name:   "tainted, no ImageWarm asks: removed at once",
		in:     func() Input { return tainted(plain) },
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintNotRequested,
	}, {
		name:   "tainted, the only one asking is suspended: removed at once",
		in:     func() Input { return tainted(paused, plain) },
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintNotRequested,
	}, {
		name:   "tainted, the one asking does not select the node: removed at once",
		in:     func() Input { return tainted(elsewhere) },
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintNotRequested,
	}, {
		name:   "tainted, asked, image missing: held until the deadline",
		in:     func() Input { return tainted(gate) },
		status: metav1.ConditionTrue, reason: warmv1.ReasonTaintWaiting, next: time.Minute,
	}, {
		name: "tainted, asked, deadline near: the next pass comes at the deadline",
		in: func() Input {
			in := tainted(gate)
			in.Taint.Deadline = t0.Add(20 * time.Second)
			return in
		},
		status: metav1.ConditionTrue, reason: warmv1.ReasonTaintWaiting, next: 20 * time.Second,
	}, {
		name: "tainted, asked, present: removed",
		in: func() Input {
			in := tainted(gate, plain)
			in.Runtime = listed(imgA) // plain's imgB is missing: it does not hold the taint
			return in
		},
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintRemoved,
		events: []string{"StartupTaintRemoved+node"},
	}, {
		name: "tainted, asked, listed but its pull still under way: held",
		in: func() Input {
			in := tainted(gate)
			in.Runtime = listed(imgA)
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling}
			return in
		},
		status: metav1.ConditionTrue, reason: warmv1.ReasonTaintWaiting,
	}, {
		name: "tainted, asked, failing, deadline passed: removed with a warning",
		in: func() Input {
			in := tainted(gate)
			in.Now = t0.Add(10 * time.Minute)
			res := failedPull(imgA, pull.ClassNotFound, t0)
			in.Engine[imgA] = backingOff(res)
			return in
		},
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintDeadlineExceeded,
		events: []string{"StartupTaintDeadline+node ns/gate"},
	}, {
		name: "removed by someone else while held",
		in: func() Input {
			in := tainted(gate)
			in.Taint.OnNode = false
			in.Conditions = prev(metav1.ConditionTrue, warmv1.ReasonTaintWaiting)
			return in
		},
		status: metav1.ConditionFalse, reason: warmv1.ReasonTaintRemovedElsewhere,
	}, {
		name: "removed earlier (an agent restarted since): never again, nothing said",
		in: func() Input {
			in := tainted(gate)
			in.Taint.OnNode = false
			in.Conditions = prev(metav1.ConditionFalse, warmv1.ReasonTaintDeadlineExceeded)
			return in
		},
		status: metav1.ConditionFalse, reason: warmv1.ReasonTaintDeadlineExceeded,
	}, {
		name: "a removal that failed is decided again",
		in: func() Input {
			in := tainted(gate)
			in.Runtime = listed(imgA)
			in.Conditions = prev(metav1.ConditionTrue, warmv1.ReasonTaintRemoveFailed)
			return in
		},
		remove: true, status: metav1.ConditionFalse, reason: warmv1.ReasonTaintRemoved,
		events: []string{"StartupTaintRemoved+node"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := decide(tc.in())
			if out.RemoveTaint != tc.remove {
				t.Errorf("removeTaint %v, want %v", out.RemoveTaint, tc.remove)
			}
			c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionStartupTaint)
			switch {
			case c == nil && tc.reason != "":
				t.Errorf("no StartupTaint condition, want %s %s", tc.status, tc.reason)
			case c != nil && tc.reason == "":
				t.Errorf("StartupTaint %s %s (%s), want none", c.Status, c.Reason, c.Message)
			case c != nil && (c.Status != tc.status || c.Reason != tc.reason):
				t.Errorf("StartupTaint %s %s (%s), want %s %s", c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
			if got := taintEvents(out.Events); !slices.Equal(got, tc.events) {
				t.Errorf("taint events %q, want %q", got, tc.events)
			}
			if tc.next > 0 && out.Next > tc.next {
				t.Errorf("next pass in %v, want at most %v", out.Next, tc.next)
			}
		})
	}
}

// TestPlanStartupTaintMessages checks what the condition and the deadline's
// event name: the ImageWarms not warm, a few of them, and the deadline.
func TestPlanStartupTaintMessages(t *testing.T) {
	var warms []warmv1.ImageWarm
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		warms = append(warms, holding(warm("ns", name, nil, imgA)))
	}
	in := tainted(warms...)
	out := decide(in)
	c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionStartupTaint)
	want := "Holding taint warmer.dev/warming, at most until 2026-11-23T12:10:00Z, for ImageWarms ns/a, ns/b, ns/c and 2 more not warm yet"
	if c == nil || c.Message != want {
		t.Fatalf("condition %+v, want message %q", c, want)
	}

	// The next pass, at the deadline: the transition time moves, and the
	// warning goes on the first ImageWarms and on the Node.
	in.State, in.Conditions, in.Now = out.State, out.Status.Conditions, t0.Add(10*time.Minute)
	out = decide(in)
	c = meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionStartupTaint)
	if c == nil || !c.LastTransitionTime.Time.Equal(in.Now) {
		t.Errorf("condition %+v, want a transition at %v", c, in.Now)
	}
	evs := taintEvents(out.Events)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "StartupTaintDeadline+node ns/a ns/b") {
		t.Fatalf("events %q, want one deadline warning", evs)
	}
	if note := out.Events[len(out.Events)-1].Note; !strings.Contains(note, "ImageWarms ns/a, ns/b, ns/c and 2 more not warm") {
		t.Errorf("deadline note %q", note)
	}
}

// taintEvents renders the taint's events as "Reason[+node] subject...".
func taintEvents(events []Event) []string {
	var out []string
	for _, e := range events {
		if e.Reason != warmv1.ReasonStartupTaintRemoved && e.Reason != warmv1.ReasonStartupTaintDeadline {
			continue
		}
		s := e.Reason
		if e.OnNode {
			s += "+node"
		}
		for _, nn := range e.warms {
			s += " " + nn.String()
		}
		if !e.Warning && e.Reason == warmv1.ReasonStartupTaintDeadline {
			s += " (not a warning)"
		}
		out = append(out, s)
	}
	return out
}
