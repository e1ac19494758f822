package plan

import (
	"cmp"
	"strings"
	"testing"
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// These tests use Decide itself: which images the runtime lists count as
// present without a pull under an entry's own credentials, per policy.

// policyInput is a node wanting imgA for namespace a (with a pull
// secret), namespace b (with one) and namespace c (without: the
// node-wide entry), under the policy.
func policyInput(v Verification) Input {
	in := input(withSecret("a", "app"), withSecret("b", "app"), warm("c", "app", nil, imgA))
	in.Verification = v
	return in
}

// askedScopes is the scopes whose entries the pass pulls, or would pull
// after the one under way (one pull per image at a time): the entries not
// present.
func askedScopes(t *testing.T, out Output) string {
	t.Helper()
	var asked []string
	for _, scope := range []string{"", "a", "b"} {
		e := entry(t, out.Status, scope)
		if e.State != warmv1.ImagePresent {
			asked = append(asked, "("+scope+")")
		}
	}
	return strings.Join(asked, " ")
}

// TestPreloadedImage: an image on the node that the agent never pulled (a
// baked node image, another client's pull) counts for every entry without
// a registry request under the kubelet's default, and under each policy as
// the kubelet's policy of the same name would have it.
func TestPreloadedImage(t *testing.T) {
	cases := []struct {
		v     Verification
		asked string // the entries still to pull
	}{
		{Verification{}, ""},
		{Verification{Policy: NeverVerifyPreloadedImages}, ""},
		{Verification{Policy: NeverVerify}, ""},
		{Verification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.test/team/*"}}, ""},
		{Verification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.test/team/a"}}, ""},
		{Verification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.test/other/*", "registry.test/team/b"}}, "() (a) (b)"},
		{Verification{Policy: AlwaysVerify}, "() (a) (b)"},
	}
	for _, c := range cases {
		t.Run(cmp.Or(string(c.v.Policy), "default")+strings.Join(c.v.Allowlist, ","), func(t *testing.T) {
			in := policyInput(c.v)
			in.Runtime = listed(imgA)
			out := Decide(in)
			if got := askedScopes(t, out); got != c.asked {
				t.Errorf("entries not present %q, want %q", got, c.asked)
			}
			if c.asked == "" && len(out.Pulls) != 0 {
				t.Errorf("pulls %+v: want none", out.Pulls)
			}
			for _, scope := range []string{"", "a", "b"} {
				if e := entry(t, out.Status, scope); e.Verified {
					t.Errorf("entry %q verified with no pull under its credentials", scope)
				}
			}
		})
	}
}

// TestPrivateImageNeverWaived: an image the agent pulled with namespace
// a's pull secret counts for a alone, under every policy but an allowlist
// naming it: b and the node-wide entry each pull it under their own
// credentials, as before there was a choice.
func TestPrivateImageNeverWaived(t *testing.T) {
	for _, v := range []Verification{{}, {Policy: NeverVerify}, {Policy: AlwaysVerify},
		{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.test/other/*"}}} {
		t.Run(cmp.Or(string(v.Policy), "default"), func(t *testing.T) {
			in := policyInput(v)
			// a's pull is under way; the runtime already lists the image.
			in.Runtime = listed(imgA)
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulling, Tag: "a"}
			during := Decide(in)
			if got := askedScopes(t, during); got != "() (a) (b)" {
				t.Errorf("during a's pull: entries not present %q, want all", got)
			}
			// a's pull returns.
			in.State, in.Now, in.ListedAt = during.State, t0.Add(2*time.Second), t0.Add(2*time.Second)
			in.Results = []pull.Result{scoped("a", t0.Add(time.Second))}
			in.Engine[imgA] = pull.Status{Image: imgA, Ref: imgA, State: pull.StatePulled, Tag: "a", Last: &in.Results[0]}
			after := Decide(in)
			if got := askedScopes(t, after); got != "() (b)" {
				t.Errorf("after a's pull: entries not present %q, want the node-wide and b's", got)
			}
			// Many passes later, with the engine's result gone.
			in.State, in.Now, in.ListedAt, in.Results = after.State, t0.Add(time.Minute), t0.Add(time.Minute), nil
			in.Engine = map[string]pull.Status{}
			later := Decide(in)
			if got := askedScopes(t, later); got != "() (b)" {
				t.Errorf("a minute later: entries not present %q, want the node-wide and b's", got)
			}
		})
	}
}

// TestPreloadedStaysPreloaded: an image first seen with no pull of the
// agent's stays preloaded when an entry later pulls it (a refresh), so
// the other entries keep it.
func TestPreloadedStaysPreloaded(t *testing.T) {
	in := policyInput(Verification{})
	in.Runtime = listed(imgA)
	first := Decide(in)
	in.State, in.Now, in.ListedAt = first.State, t0.Add(2*time.Second), t0.Add(2*time.Second)
	in.Results = []pull.Result{scoped("a", t0.Add(time.Second))}
	second := Decide(in)
	if got := askedScopes(t, second); got != "" {
		t.Errorf("entries not present %q after a's pull of a preloaded image, want none", got)
	}
}

// TestUpgradeCarriesProofs: a report written by an agent older than
// proofs (no entry verified) is taken as proofs of each entry's own
// credentials, unless every image must be verified; an entry carried so
// does not open the image to another namespace.
func TestUpgradeCarriesProofs(t *testing.T) {
	old := warmv1.NodeWarmStatus{Images: []warmv1.NodeImage{
		{Image: imgA, SecretsNamespace: "a", State: warmv1.ImagePresent, Digest: testDigest}}}
	cases := []struct {
		v     Verification
		asked string
	}{
		{Verification{}, "() (b)"},
		{Verification{Policy: NeverVerify}, "() (b)"},
		{Verification{Policy: AlwaysVerify}, "() (a) (b)"},
	}
	for _, c := range cases {
		t.Run(cmp.Or(string(c.v.Policy), "default"), func(t *testing.T) {
			in := policyInput(c.v)
			in.Runtime = listed(imgA)
			in.State = Seed(old, c.v)
			if got := askedScopes(t, Decide(in)); got != c.asked {
				t.Errorf("entries not present %q, want %q", got, c.asked)
			}
		})
	}
	// A report from a verifying agent carries its verified entries only.
	current := old
	current.Images = append([]warmv1.NodeImage{{Image: imgB, State: warmv1.ImagePresent, Verified: true, Digest: testDigest}}, old.Images...)
	if s := Seed(current, Verification{}); s.images[imgA+" a"].verifiedDigest != "" {
		t.Errorf("an unverified entry of a verifying agent's report was taken as a proof")
	}
}

// TestNewVerification: the policy and allowlist as an operator writes
// them, each refusal saying what is wrong.
func TestNewVerification(t *testing.T) {
	cases := []struct {
		policy    string
		allowlist []string
		err       string
	}{
		{"NeverVerifyPreloadedImages", nil, ""},
		{"AlwaysVerify", nil, ""},
		{"NeverVerify", nil, ""},
		{"NeverVerifyAllowlistedImages", []string{"registry.k8s.io/pause", "ghcr.io/team/*"}, ""},
		{"Never", nil, `unknown image verification policy "Never"`},
		{"AlwaysVerify", []string{"registry.k8s.io/pause"}, "only with the policy NeverVerifyAllowlistedImages"},
		{"NeverVerifyAllowlistedImages", []string{"registry.k8s.io/pause:3.10"}, "without a tag"},
		{"NeverVerifyAllowlistedImages", []string{"registry.k8s.io/pa*"}, "or a prefix ending in /*"},
		{"NeverVerifyAllowlistedImages", []string{"pause"}, "with its registry"},
	}
	for _, c := range cases {
		_, err := NewVerification(c.policy, c.allowlist)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %q: %v", c.policy, c.allowlist, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %q: error %v, want one saying %q", c.policy, c.allowlist, err, c.err)
		}
	}
}
