package plan

import (
	"slices"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// These tests use Decide itself: a pin, a proof and a count of starts
// served each go only to an entry that counts the image as present, and
// so never to an ImageWarm whose credentials did not fetch another
// namespace's image.

// pinnedSecret is a Pinned ImageWarm of ns wanting imgA with a pull secret.
func pinnedSecret(ns, name string) warmv1.ImageWarm {
	iw := withSecret(ns, name)
	iw.Spec.Retention = warmv1.RetentionPinned
	return iw
}

// TestSuspendedPinNeedsProof: namespace a pinned its private image and
// let it go; namespace b's suspended Pinned ImageWarm never pulled it
// under b's credentials, so it must not keep warmer's pin: with no pull
// coming (suspended), "not refused yet" would keep it for ever.
func TestSuspendedPinNeedsProof(t *testing.T) {
	paused := pinnedSecret("b", "paused")
	paused.Spec.Suspend = true
	for _, v := range []Verification{{}, {Policy: AlwaysVerify}} {
		in := input(pinnedSecret("a", "keep"), paused)
		in.Verification = v
		in.Runtime = listed(imgA)
		in.Results = []pull.Result{scoped("a", t0.Add(-time.Second))}
		in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulled, Tag: "a", Last: &in.Results[0]}
		first := Decide(in)
		if !slices.Equal(first.Pins, []string{imgA}) {
			t.Fatalf("%s: pins %q: a's own pull brought it, a pins it", v.Policy, first.Pins)
		}

		later := input(paused) // a's ImageWarm is gone
		later.Verification, later.State = v, first.State
		later.Now, later.ListedAt = t0.Add(time.Minute), t0.Add(time.Minute)
		later.Runtime, later.Pins = pinnedListing(listed(imgA), imgA), PinView{Mine: mine(imgA)}
		later.Engine[imgA] = in.Engine[imgA]
		out := Decide(later)
		if !slices.Equal(out.Unpins, []string{imgA}) {
			t.Errorf("%s: unpins %q: b's suspended ImageWarm never proved access, it must not keep a's pin", v.Policy, out.Unpins)
		}
		if e := entry(t, out.Status, "b"); e.State == warmv1.ImagePresent || e.Verified {
			t.Errorf("%s: b's entry %s verified=%v", v.Policy, e.State, e.Verified)
		}
	}
}

// TestUnknownPinsAreNotOthers: when warmer's pins cannot be listed, an
// image the runtime reports pinned may carry warmer's own pin, made for
// another namespace: it is no proof for an entry, the entry is not
// reported verified, and a restart seeding from that report finds no
// proof in it. The image is not pulled meanwhile either: if someone else
// pinned it, a pull would take their pin away.
func TestUnknownPinsAreNotOthers(t *testing.T) {
	v := Verification{Policy: AlwaysVerify}
	in := input(withSecret("b", "app"))
	in.Verification = v
	in.Runtime = pinnedListing(listed(imgA), imgA)
	in.Pins = PinView{Problem: "listing warmer's pins: images.List: unavailable"}
	out := Decide(in)
	if e := entry(t, out.Status, "b"); e.Verified || e.State == warmv1.ImagePresent {
		t.Errorf("b's entry %s verified=%v while warmer's pins are unknown: want neither", e.State, e.Verified)
	}
	if len(out.Pulls) != 0 {
		t.Errorf("pulls %+v of an image pinned by someone, maybe not warmer: a pull would drop their pin", out.Pulls)
	}
	if e := entry(t, out.Status, "b"); e.State != warmv1.ImageQueued || e.Message != pinUnknownStatus {
		t.Errorf("b's entry %s %q: want Queued, saying why it waits", e.State, e.Message)
	}

	// The agent restarts from that report; warmer's pins list again, and
	// the pin is warmer's own.
	next := input(withSecret("b", "app"))
	next.Verification, next.State = v, Seed(out.Status, v)
	next.Runtime, next.Pins = pinnedListing(listed(imgA), imgA), PinView{Mine: mine(imgA)}
	after := Decide(next)
	if e := entry(t, after.Status, "b"); e.Verified || e.State == warmv1.ImagePresent {
		t.Errorf("after a restart b's entry %s verified=%v: the report made a lasting proof of an unknown pin", e.State, e.Verified)
	}
	if len(after.Pulls) != 1 || after.Pulls[0].Scope != "b" {
		t.Errorf("pulls %+v: want b's, to prove its access", after.Pulls)
	}
}

// TestServedStartsNeedPresence: starts of an image the agent pulled with
// namespace a's pull secret count for a's ImageWarm, not for b's, whose
// credentials never fetched it.
func TestServedStartsNeedPresence(t *testing.T) {
	for _, v := range []Verification{{}, {Policy: NeverVerify}, {Policy: AlwaysVerify}} {
		in := input(withSecret("a", "app"), withSecret("b", "app"))
		in.Verification = v
		in.Runtime = listed(imgA)
		in.Results = []pull.Result{scoped("a", t0.Add(-time.Second))}
		in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulled, Tag: "a", Last: &in.Results[0]}
		in.ServedStarts, in.ServedByImage = 3, map[string]int{imgA: 3}
		out := Decide(in)
		served := map[string]int32{}
		for _, w := range out.Status.Warms {
			served[w.Namespace] = w.ServedStarts
		}
		if served["a"] != 3 || served["b"] != 0 {
			t.Errorf("%s: starts served by namespace %v: want a 3, b 0 (b never proved access)", v.Policy, served)
		}
	}
}
