package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// These tests use Decide itself: the runtime's images count for an entry
// only once a pull under its credentials brought them.

// withSecret is an ImageWarm of ns wanting imgA with a pull secret.
func withSecret(ns, name string) warmv1.ImageWarm {
	iw := warm(ns, name, nil, imgA)
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	return iw
}

// entry finds the status entry of imgA for the scope.
func entry(t *testing.T, st warmv1.NodeWarmStatus, scope string) warmv1.NodeImage {
	t.Helper()
	for _, img := range st.Images {
		if img.Image == imgA && img.SecretsNamespace == scope {
			return img
		}
	}
	t.Fatalf("no entry of %s for %q in %+v", imgA, scope, st.Images)
	return warmv1.NodeImage{}
}

// verifyingInput is input with every image verified (AlwaysVerify): the
// tests of proofs themselves, with no waiver in the way.
func verifyingInput(warms ...warmv1.ImageWarm) Input {
	in := input(warms...)
	in.Verification = Verification{Policy: AlwaysVerify}
	return in
}

// scoped is a successful pull of imgA under scope's credentials.
func scoped(scope string, finished time.Time) pull.Result {
	res := pulled(imgA, finished)
	res.Tag = scope
	return res
}

// TestEntriesByCredentials: namespaces that name pull secrets for an image
// get an entry each, with their own secrets and wishes; the others share
// the node-wide entry, whose pull uses nobody's secrets.
func TestEntriesByCredentials(t *testing.T) {
	always := withSecret("a", "fast")
	always.Spec.PullPolicy = warmv1.PullAlways
	always.Spec.RefreshInterval = &metav1.Duration{Duration: time.Minute}
	always.Spec.Retention = warmv1.RetentionPinned
	d, _ := desiredImages("", nil, []warmv1.ImageWarm{always, withSecret("b", "slow"), warm("c", "public", nil, imgA), warm("d", "public", nil, imgA)})
	if got := d.Keys(); !slices.Equal(got, []string{imgA, imgA + " a", imgA + " b"}) {
		t.Fatalf("entries %q", got)
	}
	shared, a, b := d.images[imgA], d.images[imgA+" a"], d.images[imgA+" b"]
	if len(shared.secrets) != 0 || len(shared.warms) != 2 || shared.refresh != 0 || shared.pin {
		t.Errorf("node-wide entry %+v: want c and d's wishes, no secrets", shared)
	}
	if a.refresh != time.Minute || !a.pin || !slices.Equal(a.secrets, []types.NamespacedName{{Namespace: "a", Name: "regcred"}}) {
		t.Errorf("a's entry %+v: want its refresh, pin and secret", a)
	}
	if b.refresh != 0 || b.pin || !slices.Equal(b.secrets, []types.NamespacedName{{Namespace: "b", Name: "regcred"}}) {
		t.Errorf("b's entry %+v: want none of a's wishes, only b's secret", b)
	}
	if got := d.Refs(); !slices.Equal(got, []string{imgA}) {
		t.Errorf("refs %q, want the one image", got)
	}
}

// TestVerification walks one image through two namespaces' entries: the
// runtime has it (team b's pods brought it), a's and the node-wide entry
// must each pull it under their own credentials before it counts for
// them, one pull at a time, and a's refusal leaves b's entry alone.
func TestVerification(t *testing.T) {
	warms := []warmv1.ImageWarm{withSecret("a", "app"), withSecret("b", "app"), warm("c", "app", nil, imgA)}
	in := verifyingInput(warms...)
	in.Runtime = listed(imgA)

	first := Decide(in)
	if len(first.Pulls) != 1 || first.Pulls[0].Scope != "" || len(first.Pulls[0].Secrets) != 0 {
		t.Fatalf("pulls %+v: want one, the node-wide entry's, with no secret", first.Pulls)
	}
	for _, scope := range []string{"", "a", "b"} {
		if e := entry(t, first.Status, scope); e.State == warmv1.ImagePresent || e.Verified {
			t.Errorf("entry %q %s verified=%v before any pull under its credentials", scope, e.State, e.Verified)
		}
	}

	// The node-wide pull returns; b's is under way.
	in.State, in.Now, in.ListedAt = first.State, t0.Add(2*time.Second), t0.Add(2*time.Second)
	in.Results = []pull.Result{scoped("", t0.Add(time.Second))}
	in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling, Tag: "b"}
	second := Decide(in)
	if e := entry(t, second.Status, ""); e.State != warmv1.ImagePresent || !e.Verified {
		t.Errorf("node-wide entry %+v after its pull: want Present, verified", e)
	}
	if e := entry(t, second.Status, "b"); e.State != warmv1.ImagePulling {
		t.Errorf("b's entry %s: want Pulling, the engine's job is b's", e.State)
	}
	if e := entry(t, second.Status, "a"); e.State != warmv1.ImageQueued {
		t.Errorf("a's entry %s: want Queued behind b's pull", e.State)
	}
	if len(second.Pulls) != 1 || second.Pulls[0].Scope != "b" {
		t.Fatalf("pulls %+v: want b's, under way, alone", second.Pulls)
	}

	// b's pull succeeds, a's is refused.
	refused := failedPull(imgA, pull.ClassUnauthorized, t0.Add(4*time.Second))
	refused.Tag = "a"
	in.State, in.Now, in.ListedAt = second.State, t0.Add(5*time.Second), t0.Add(5*time.Second)
	in.Results = []pull.Result{scoped("b", t0.Add(3*time.Second)), refused}
	in.Engine[imgA] = backingOff(refused)
	third := Decide(in)
	if e := entry(t, third.Status, "b"); e.State != warmv1.ImagePresent {
		t.Errorf("b's entry %s: want Present", e.State)
	}
	if e := entry(t, third.Status, "a"); e.State != warmv1.ImageBackOff || e.Reason != string(pull.ClassUnauthorized) {
		t.Errorf("a's entry %s %s: want BackOff Unauthorized, though the image is on the node", e.State, e.Reason)
	}
	if slices.ContainsFunc(third.Pulls, func(p Pull) bool { return p.Scope == "b" || p.Scope == "" }) {
		t.Errorf("pulls %+v: b's and the node-wide entry are done", third.Pulls)
	}
	wantFailedTold(t, in, third, "Unauthorized")
}

// wantFailedTold runs the pass after prev once the ImageWarm's failures
// held still: one summed-up Failed event, saying why.
func wantFailedTold(t *testing.T, in Input, prev Output, why string) {
	t.Helper()
	in.State, in.Now, in.Results = prev.State, in.Now.Add(failureSettle), nil
	out := Decide(in)
	if evs := out.Events; len(evs) != 1 || evs[0].Reason != warmv1.ReasonFailed || !strings.Contains(evs[0].Note, why) {
		t.Errorf("events %+v: want the ImageWarm's Failed, saying %s", evs, why)
	}
}

// TestVerificationProofs: what counts as a pull under an entry's
// credentials, and what a restarted agent keeps.
func TestVerificationProofs(t *testing.T) {
	base := func() Input {
		in := verifyingInput(withSecret("a", "app"))
		in.Runtime = listed(imgA)
		return in
	}
	cases := []struct {
		name    string
		in      func() Input
		present bool
	}{{
		name: "another entry's pull proves nothing",
		in: func() Input {
			in := base()
			in.Results = []pull.Result{scoped("b", t0.Add(-time.Second))}
			return in
		},
	}, {
		name: "another spelling's pull (no PullImage call) proves nothing",
		in: func() Input {
			in := base()
			res := scoped("a", t0.Add(-time.Second))
			res.Attempts = 0
			in.Results = []pull.Result{res}
			return in
		},
	}, {
		name: "its own pull",
		in: func() Input {
			in := base()
			in.Results = []pull.Result{scoped("a", t0.Add(-time.Second))}
			return in
		},
		present: true,
	}, {
		name: "a report's verified entry, same digest",
		in: func() Input {
			in := base()
			in.State = Seed(warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{
				{Image: imgA, SecretsNamespace: "a", State: warmv1.ImagePresent, Verified: true, Digest: testDigest}}}, in.Verification)
			return in
		},
		present: true,
	}, {
		name: "a report's verified entry, the image changed since",
		in: func() Input {
			in := base()
			in.State = Seed(warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{
				{Image: imgA, SecretsNamespace: "a", State: warmv1.ImagePresent, Verified: true, Digest: "sha256:" + fmt.Sprintf("%064d", 1)}}}, in.Verification)
			return in
		},
	}, {
		name: "a report's entry from before verification",
		in: func() Input {
			in := base()
			in.State = Seed(warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{
				{Image: imgA, SecretsNamespace: "a", State: warmv1.ImagePresent, Digest: testDigest}}}, in.Verification)
			return in
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := Decide(c.in())
			e := entry(t, out.Status, "a")
			if got := e.State == warmv1.ImagePresent; got != c.present || e.Verified != c.present {
				t.Errorf("a's entry %s verified=%v, want present %v", e.State, e.Verified, c.present)
			}
			if asked := len(out.Pulls) == 1 && out.Pulls[0].Scope == "a"; asked == c.present {
				t.Errorf("pulls %+v; want a pull under a's credentials: %v", out.Pulls, !c.present)
			}
		})
	}
}

// TestPinsFollowCredentials: an ImageWarm whose credentials cannot fetch
// an image does not keep warmer's pin on it once the namespace that
// pinned it let it go; one whose credentials brought it pins it; one the
// default policy waives (the agent holds no proof of the image under any
// credentials: preloaded) keeps it, as the image counts as present for it
// (TestSuspendedPinNeedsProof has the same without the waiver).
func TestPinsFollowCredentials(t *testing.T) {
	pinned := withSecret("a", "keep")
	pinned.Spec.Retention = warmv1.RetentionPinned
	refused := failedPull(imgA, pull.ClassUnauthorized, t0.Add(-time.Second))
	refused.Tag = "a"

	in := input(pinned)
	in.Runtime = listed(imgA)
	in.Pins = PinView{Mine: map[string]bool{imgA: true}} // b pinned it, and is gone
	in.Results = []pull.Result{refused}
	in.Engine[imgA] = backingOff(refused)
	if out := Decide(in); !slices.Equal(out.Unpins, []string{imgA}) {
		t.Errorf("unpins %q: a's refused credentials must not keep the pin", out.Unpins)
	}

	in = input(pinned)
	in.Runtime = listed(imgA)
	in.Pins = PinView{Mine: map[string]bool{imgA: true}}
	if out := Decide(in); len(out.Unpins) != 0 {
		t.Errorf("unpins %q: the image counts as preloaded for a, whose entry keeps the pin", out.Unpins)
	}

	in = input(pinned)
	in.Runtime = listed(imgA)
	in.Results = []pull.Result{scoped("a", t0.Add(-time.Second))}
	if out := Decide(in); !slices.Equal(out.Pins, []string{imgA}) {
		t.Errorf("pins %q: a's own pull brought it, a pins it", out.Pins)
	}
}

// TestBackOffPerEntry: the engine holds one result per image, so once
// another entry's pull came since, an entry's back-off is its own
// failure's; it stays BackOff, not Queued, and its pull waits.
func TestBackOffPerEntry(t *testing.T) {
	in := input(warm("b", "free", nil, imgA), withSecret("c", "guess"))
	mine := failedPull(imgA, pull.ClassUnauthorized, t0.Add(-2*time.Second)) // node-wide, RetryAt t0+8s
	theirs := failedPull(imgA, pull.ClassUnauthorized, t0.Add(-time.Second))
	theirs.Tag = "c"
	in.Results = []pull.Result{mine, theirs}
	in.Engine[imgA] = backingOff(theirs)
	out := Decide(in)
	for _, scope := range []string{"", "c"} {
		if e := entry(t, out.Status, scope); e.State != warmv1.ImageBackOff || e.Reason != string(pull.ClassUnauthorized) {
			t.Errorf("entry %q: %s %s, want BackOff Unauthorized", scope, e.State, e.Reason)
		}
	}
	if out.Next > 8*time.Second {
		t.Errorf("next pass in %v: want by the end of the node-wide entry's back-off", out.Next)
	}
}

// TestProofsOutliveEntries: an ImageWarm that stops and starts matching
// the node finds its entry's proof again, within proofTTL; and an image
// pinned by someone other than warmer counts as present without a pull
// (a pull on containerd would take the pin away), one warmer pinned does
// not.
func TestProofsOutliveEntries(t *testing.T) {
	in := verifyingInput(withSecret("a", "app"))
	in.Runtime = listed(imgA)
	in.Results = []pull.Result{scoped("a", t0.Add(-time.Second))}
	state := Decide(in).State

	gone := verifyingInput() // the ImageWarm no longer matches
	gone.Runtime, gone.State, gone.Now = listed(imgA), state, t0.Add(time.Minute)
	state = Decide(gone).State

	back := verifyingInput(withSecret("a", "app"))
	back.Runtime, back.State, back.Now = listed(imgA), state, t0.Add(2*time.Minute)
	out := Decide(back)
	if e := entry(t, out.Status, "a"); e.State != warmv1.ImagePresent || len(out.Pulls) != 0 {
		t.Errorf("back after a minute: %s, pulls %+v; want Present from the kept proof", e.State, out.Pulls)
	}

	late := verifyingInput(withSecret("a", "app"))
	late.Runtime, late.State, late.Now = listed(imgA), Decide(gone).State, t0.Add(proofTTL+2*time.Minute)
	if out := Decide(late); len(out.Pulls) != 1 {
		t.Errorf("back after proofTTL: pulls %+v; want a new check", out.Pulls)
	}

	pinned := listed(imgA)
	li := pinned[imgA]
	li.Pinned = true
	pinned[imgA] = li
	byOthers := verifyingInput(withSecret("a", "app"))
	byOthers.Runtime = pinned
	if e := entry(t, Decide(byOthers).Status, "a"); e.State != warmv1.ImagePresent {
		t.Errorf("pinned by someone else: %s; want Present without a pull", e.State)
	}
	byWarmer := verifyingInput(withSecret("a", "app"))
	byWarmer.Runtime, byWarmer.Pins = pinned, PinView{Mine: map[string]bool{imgA: true}}
	if out := Decide(byWarmer); len(out.Pulls) != 1 {
		t.Errorf("pinned by warmer for another entry: pulls %+v; want a check under a's credentials", out.Pulls)
	}
}

// TestTagProvesItsDigest: an ImageWarm that names an image by tag and
// another that names the same image by digest, both node-wide: once the
// tag's pull brought it, the digest's entry counts it as present without
// a pull of its own; the same image ID in another repository, or for a
// namespace's entry, proves nothing.
func TestTagProvesItsDigest(t *testing.T) {
	byDigest := "registry.test/team/a@" + testDigest
	elsewhere := "registry.test/other/a:v1"
	secretDigest := withSecret("s", "digest")
	secretDigest.Spec.Images = []warmv1.ImageReference{warmv1.ImageReference(byDigest)}
	in := verifyingInput(warm("x", "tag", nil, imgA), warm("y", "digest", nil, byDigest), warm("z", "other", nil, elsewhere), secretDigest)
	// The runtime holds one image under all three names.
	one := pull.PresentImage{ID: "sha256:id-" + imgA, RepoDigest: byDigest, Size: 1 << 20}
	in.Runtime = runtimeImages{imgA: one, byDigest: one, elsewhere: one}
	first := Decide(in)
	in.State, in.Now, in.ListedAt = first.State, t0.Add(2*time.Second), t0.Add(2*time.Second)
	in.Results = []pull.Result{pulled(imgA, t0.Add(time.Second))}
	out := Decide(in)
	state := map[string]warmv1.NodeImage{}
	for _, img := range out.Status.Images {
		state[img.Image+" "+img.SecretsNamespace] = img
	}
	if e := state[byDigest+" "]; e.State != warmv1.ImagePresent || !e.Verified {
		t.Errorf("the digest's node-wide entry %+v: want Present, verified by the tag's pull", e)
	}
	for _, key := range []string{elsewhere + " ", byDigest + " s"} {
		if e := state[key]; e.State == warmv1.ImagePresent || e.Verified {
			t.Errorf("entry %q %+v present by another repository's or other credentials' pull", key, e)
		}
	}
	for _, p := range out.Pulls {
		if p.Image == byDigest && p.Scope == "" {
			t.Errorf("a pull of the digest's node-wide entry was asked for: %+v", p)
		}
	}
}
