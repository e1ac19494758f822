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

// pinnedListing is the runtime's list with keys reported pinned.
func pinnedListing(r runtimeImages, keys ...string) runtimeImages {
	for _, k := range keys {
		pi := r[k]
		pi.Pinned = true
		r[k] = pi
	}
	return r
}

func mine(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// pinnedWarm is an ImageWarm with retention Pinned.
func pinnedWarm(name string, images ...string) warmv1.ImageWarm {
	iw := warm("ns", name, nil, images...)
	iw.Spec.Retention = warmv1.RetentionPinned
	return iw
}

// TestPlanPins: which names a pass pins and unpins, what the status says
// of each image, and the Pinning condition.
func TestPlanPins(t *testing.T) {
	pinned := pinnedWarm("pinned", imgA)
	plain := warm("ns", "plain", nil, imgA, imgB)
	paused := pinnedWarm("paused", imgA)
	paused.Spec.Suspend = true

	for _, c := range []struct {
		name         string
		in           func() Input
		pins, unpins []string
		// status is each image's pinned flag in the NodeWarm.
		status map[string]bool
		reason string // the Pinning condition's
	}{{
		name:   "present and asked: pinned",
		in:     func() Input { in := input(pinned); in.Runtime = listed(imgA); return in },
		pins:   []string{imgA},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name:   "missing: nothing to pin until it arrives",
		in:     func() Input { return input(pinned) },
		status: map[string]bool{imgA: false},
		reason: warmv1.ReasonNothingToPin,
	}, {
		name: "just pulled, not listed yet: pinned, the name exists",
		in: func() Input {
			in := input(pinned)
			in.Results = []pull.Result{pulled(imgA, t0)}
			return in
		},
		pins:   []string{imgA},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name: "already pinned by warmer: nothing to do",
		in: func() Input {
			in := input(pinned)
			in.Runtime, in.Pins.Mine = pinnedListing(listed(imgA), imgA), mine(imgA)
			return in
		},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name: "marked by warmer, the runtime's list not caught up: not pinned twice",
		in: func() Input {
			in := input(pinned)
			in.Runtime, in.Pins.Mine = listed(imgA), mine(imgA)
			return in
		},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name: "pinned by someone else: left alone, reported pinned",
		in: func() Input {
			in := input(pinned)
			in.Runtime = pinnedListing(listed(imgA), imgA)
			return in
		},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name: "someone else's pin on an image no Pinned ImageWarm wants: never unpinned",
		in: func() Input {
			in := input(plain)
			in.Runtime = pinnedListing(listed(imgA, imgB), imgA)
			return in
		},
		status: map[string]bool{imgA: true, imgB: false},
		reason: warmv1.ReasonNothingToPin,
	}, {
		name: "the last Pinned ImageWarm switched to Unpinned: unpinned",
		in: func() Input {
			in := input(plain)
			in.Runtime, in.Pins.Mine = pinnedListing(listed(imgA, imgB), imgA), mine(imgA)
			return in
		},
		unpins: []string{imgA},
		status: map[string]bool{imgA: true, imgB: false},
		reason: warmv1.ReasonNothingToPin,
	}, {
		name: "the last ImageWarm wanting it is gone: unpinned",
		in: func() Input {
			in := input(warm("ns", "other", nil, imgB))
			in.Runtime, in.Pins.Mine = pinnedListing(listed(imgA, imgB), imgA), mine(imgA)
			return in
		},
		unpins: []string{imgA},
		status: map[string]bool{imgB: false},
		reason: warmv1.ReasonNothingToPin,
	}, {
		name: "a Pinned ImageWarm still wants it beside an Unpinned one: kept",
		in: func() Input {
			in := input(pinned, plain)
			in.Runtime, in.Pins.Mine = pinnedListing(listed(imgA, imgB), imgA), mine(imgA)
			return in
		},
		status: map[string]bool{imgA: true, imgB: false},
		reason: warmv1.ReasonPinned,
	}, {
		name: "suspended: the pin stays",
		in: func() Input {
			in := input(paused)
			in.Runtime, in.Pins.Mine = pinnedListing(listed(imgA), imgA), mine(imgA)
			return in
		},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinned,
	}, {
		name: "the runtime cannot pin: warmed, not pinned, and the condition says why",
		in: func() Input {
			in := input(pinned)
			in.Runtime, in.Pins.Unable = listed(imgA), "runtime cri-o 1.31 is not containerd"
			return in
		},
		status: map[string]bool{imgA: false},
		reason: warmv1.ReasonRuntimeCannotPin,
	}, {
		name: "the last pin failed: tried again, and the condition says so",
		in: func() Input {
			in := input(pinned)
			in.Runtime, in.Pins.Problem = listed(imgA), "pinning "+imgA+": images.Update: unavailable"
			return in
		},
		pins:   []string{imgA},
		status: map[string]bool{imgA: true},
		reason: warmv1.ReasonPinFailed,
	}} {
		t.Run(c.name, func(t *testing.T) {
			out := decide(c.in())
			if !slices.Equal(out.Pins, c.pins) || !slices.Equal(out.Unpins, c.unpins) {
				t.Errorf("pins %v, unpins %v; want %v, %v", out.Pins, out.Unpins, c.pins, c.unpins)
			}
			got := map[string]bool{}
			for _, img := range out.Status.Images {
				got[img.Image] = img.Pinned
			}
			if len(got) != len(c.status) {
				t.Errorf("status images %v, want %v", got, c.status)
			}
			for k, want := range c.status {
				if got[k] != want {
					t.Errorf("%s pinned %v in the status, want %v", k, got[k], want)
				}
			}
			cond := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionPinning)
			if cond == nil || cond.Reason != c.reason {
				t.Fatalf("Pinning condition %+v, want reason %s", cond, c.reason)
			}
			wantStatus := metav1.ConditionTrue
			if c.reason == warmv1.ReasonRuntimeCannotPin || c.reason == warmv1.ReasonPinFailed {
				wantStatus = metav1.ConditionFalse
			}
			if cond.Status != wantStatus || cond.Message == "" {
				t.Errorf("Pinning condition %+v, want status %s and a message", cond, wantStatus)
			}
		})
	}
}

// wantRetryAt checks that each entry tries again at want.
func wantRetryAt(t *testing.T, want time.Time, imgs ...warmv1.NodeImage) {
	t.Helper()
	for _, img := range imgs {
		if img.RetryAt == nil || !img.RetryAt.Time.Equal(want) {
			t.Errorf("retryAt %v, want %v (when the window ends)", img.RetryAt, want)
		}
	}
}

// TestPlanEvictionBackOff follows an image the node keeps removing: the
// first eviction after a long stay pulls again at once; evictions in a row
// soon after arrival wait out a doubling window from the last arrival,
// with a reason that says the disk is too small for what is asked.
func TestPlanEvictionBackOff(t *testing.T) {
	b := BackOff{Initial: 10 * time.Second, Max: 40 * time.Second}
	iw := warm("ns", "one", nil, imgA)
	pass := func(now time.Time, state State, present bool) Output {
		in := input(iw)
		in.Now, in.ListedAt, in.State, in.EvictionBackOff = now, now.Add(-time.Millisecond), state, b
		if present {
			in.Runtime = listed(imgA)
		}
		return decide(in)
	}
	wantPull := func(t *testing.T, out Output, want bool) {
		t.Helper()
		if got := len(out.Pulls) == 1; got != want {
			t.Errorf("pull asked %v, want %v (status %+v)", got, want, out.Status.Images[0])
		}
	}

	// Arrived long ago, then removed: pulled again at once.
	out := pass(t0, State{}, true)
	now := t0.Add(time.Hour)
	out = pass(now, out.State, false)
	wantPull(t, out, true)
	if got := eventNames(out.Events); !slices.Equal(got, []string{warmv1.ReasonEvicted + " " + imgA}) {
		t.Fatalf("events %q, want Evicted", got)
	}

	// Back 2 s later, removed again 3 s after that: a repeat within the
	// window of the first eviction, so it waits 20 s from its arrival.
	arrived := now.Add(2 * time.Second)
	out = pass(arrived, out.State, true)
	out = pass(arrived.Add(3*time.Second), out.State, false)
	wantPull(t, out, false)
	img := out.Status.Images[0]
	if img.State != warmv1.ImageBackOff || img.Reason != warmv1.ReasonEvictedRepeatedly || !strings.Contains(img.Message, "too small") {
		t.Errorf("status %+v, want BackOff, EvictedRepeatedly, and a message naming the disk", img)
	}
	if out.Next != 17*time.Second {
		t.Errorf("next pass in %v, want 17s (when the window ends)", out.Next)
	}
	// Still within the window, the next try stays where it was: a status
	// that moved with the clock would be written at every pass.
	wantRetryAt(t, arrived.Add(20*time.Second), img, pass(arrived.Add(10*time.Second), out.State, false).Status.Images[0])
	if e := out.Events; len(e) != 1 || !strings.Contains(e[0].Note, "2 time(s) in a row") {
		t.Errorf("events %+v, want one Evicted counting 2 evictions", e)
	}
	// Still within the window: no pull, no new event.
	out = pass(arrived.Add(19*time.Second), out.State, false)
	wantPull(t, out, false)
	if len(out.Events) != 0 {
		t.Errorf("events %v while waiting, want none", eventNames(out.Events))
	}
	// The window over: pulled again.
	out = pass(arrived.Add(20*time.Second), out.State, false)
	wantPull(t, out, true)
	// Back again: present, and still saying it was removed twice, so the
	// NodeWarm keeps the record after the pull's progress went unwritten.
	back := arrived.Add(21 * time.Second)
	in := input(iw)
	in.Now, in.ListedAt, in.State, in.EvictionBackOff, in.Runtime, in.Resync = back, back.Add(-time.Millisecond), out.State, b, listed(imgA), time.Hour
	out = decide(in)
	if img := out.Status.Images[0]; img.State != warmv1.ImagePresent || img.Reason != warmv1.ReasonEvictedRepeatedly ||
		!strings.Contains(img.Message, "2 time(s) in a row") {
		t.Errorf("status %+v, want Present, EvictedRepeatedly, counting 2", img)
	}
	if out.Next != 2*b.Max {
		t.Errorf("next pass in %v, want %v (when the record ends)", out.Next, 2*b.Max)
	}
	// Stayed long enough: the record ends.
	out = pass(back.Add(2*b.Max), out.State, true)
	if img := out.Status.Images[0]; img.State != warmv1.ImagePresent || img.Reason != "" || img.Message != "" {
		t.Errorf("status %+v after a long stay, want Present with no reason", img)
	}

	// The window stops doubling at the maximum.
	if got := b.after(5); got != b.Max {
		t.Errorf("window after 5 evictions %v, want the maximum %v", got, b.Max)
	}
	// With no back-off configured, nothing is held.
	if got := (BackOff{}).after(3); got != 0 {
		t.Errorf("zero policy holds %v", got)
	}
}
