package gate

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	warm := NodeState{Name: "a", Warm: true}
	coming := NodeState{Name: "b", Coming: true}
	cold := NodeState{Name: "c"}
	full := NodeState{Name: "d", Refused: "DiskPressure"}
	cases := []struct {
		name    string
		in      Input
		release bool
		warm    bool
		reason  string
		requeue time.Duration
	}{
		{"no ImageWarm", Input{Now: t0, Created: t0, Deadline: time.Minute}, true, false, ReasonImageWarmNotFound, 0},
		{"deadline passed", Input{Now: t0.Add(time.Minute), Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{coming}}, true, false, ReasonDeadlineExceeded, 0},
		{"deadline beats warm", Input{Now: t0.Add(2 * time.Minute), Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{warm}}, true, false, ReasonDeadlineExceeded, 0},
		{"image not listed yet", Input{Now: t0.Add(10 * time.Second), Created: t0, Deadline: time.Minute, ImageWarmFound: true, Unlisted: []string{"x"}, Nodes: []NodeState{warm}}, false, false, "", 50 * time.Second},
		{"no eligible node", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true}, true, false, ReasonNoEligibleNode, 0},
		{"warm and nothing coming", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{warm, cold, full}}, true, true, ReasonWarm, 0},
		{"warm but another coming", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{warm, coming}}, false, false, "", time.Minute},
		{"only coming", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{coming}}, false, false, "", time.Minute},
		{"only cold waits for the deadline", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{cold}}, false, false, "", time.Minute},
		{"every node refused", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{full, full}}, true, false, ReasonCannotWarm, 0},
		{"some refused, some cold", Input{Now: t0, Created: t0, Deadline: time.Minute, ImageWarmFound: true, Nodes: []NodeState{full, cold}}, false, false, "", time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Release != c.release || d.Warm != c.warm || d.Reason != c.reason || d.RequeueAfter != c.requeue {
				t.Errorf("Decide = %+v; want release %v warm %v reason %q requeue %v", d, c.release, c.warm, c.reason, c.requeue)
			}
			if d.Release && d.Message == "" {
				t.Error("a release without a message")
			}
		})
	}
}

func TestDecideNotesABadDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := Decide(Input{Now: t0.Add(time.Hour), Created: t0, Deadline: MaxDeadline, ImageWarmFound: true, Note: "bad annotation"})
	if !strings.HasSuffix(d.Message, "; bad annotation") {
		t.Errorf("message %q does not carry the note", d.Message)
	}
	if ValidDeadline("5h") || ValidDeadline("soon") || !ValidDeadline("90s") {
		t.Error("ValidDeadline")
	}
}

func TestDeadlineOf(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
	}{
		{"", DefaultDeadline}, {"90s", 90 * time.Second}, {"5h", MaxDeadline}, {"-1m", 0}, {"soon", DefaultDeadline},
	} {
		if got := deadlineOf(map[string]string{AnnotationDeadline: c.value}); got != c.want {
			t.Errorf("deadlineOf(%q) = %v; want %v", c.value, got, c.want)
		}
	}
}
