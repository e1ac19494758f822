package plan

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// Which images count as present without a pull under an entry's own
// credentials. An image is present for an entry once a pull under that
// entry's credentials brought it (a proof): for an image whose layers are
// already there, a manifest request. An image the agent has no proof for
// at all, one put on the node by someone else (baked into the node's
// image, pulled by the kubelet or with ctr), would cost one such request
// per image and node before it counted. The operator chooses, with the
// kubelet's own policy names and meanings
// (imagePullCredentialsVerificationPolicy), which images need none.
//
// Whatever the policy, an image this agent pulled with one namespace's
// pull secrets never counts for another namespace without that
// namespace's own pull: a namespace's private image is not waived to
// another.

// VerifyPolicy names the images that count as present without a proof.
type VerifyPolicy string

const (
	// NeverVerify: every image the runtime lists counts for every entry,
	// but one this agent pulled with another namespace's pull secrets.
	NeverVerify VerifyPolicy = "NeverVerify"
	// NeverVerifyPreloadedImages: an image this agent never pulled, under
	// any credentials, counts for every entry (the kubelet's default).
	NeverVerifyPreloadedImages VerifyPolicy = "NeverVerifyPreloadedImages"
	// NeverVerifyAllowlistedImages: only images whose repository is on
	// the allowlist count without a proof.
	NeverVerifyAllowlistedImages VerifyPolicy = "NeverVerifyAllowlistedImages"
	// AlwaysVerify: every entry needs its own proof.
	AlwaysVerify VerifyPolicy = "AlwaysVerify"
)

// VerifyPolicies are the policies, the default first.
var VerifyPolicies = []VerifyPolicy{NeverVerifyPreloadedImages, NeverVerify, NeverVerifyAllowlistedImages, AlwaysVerify}

// Verification is the operator's choice of which images need no proof.
type Verification struct {
	// Policy is the choice; empty means NeverVerifyPreloadedImages.
	Policy VerifyPolicy
	// Allowlist holds the repositories NeverVerifyAllowlistedImages waives,
	// in the kubelet's form: a repository ("registry.example/team/app")
	// or a prefix of path segments ending in "/*"
	// ("registry.example/team/*").
	Allowlist []string
}

// NewVerification checks a policy and its allowlist, as an operator wrote
// them.
func NewVerification(policy string, allowlist []string) (Verification, error) {
	v := Verification{Policy: VerifyPolicy(policy), Allowlist: allowlist}
	known := false
	for _, p := range VerifyPolicies {
		known = known || v.Policy == p
	}
	if !known {
		return v, fmt.Errorf("unknown image verification policy %q: want one of %v", policy, VerifyPolicies)
	}
	if len(allowlist) > 0 && v.Policy != NeverVerifyAllowlistedImages {
		return v, fmt.Errorf("an allowlist is read only with the policy %s, not %s", NeverVerifyAllowlistedImages, policy)
	}
	for _, entry := range allowlist {
		if err := checkAllowlistEntry(entry); err != nil {
			return v, err
		}
	}
	return v, nil
}

// checkAllowlistEntry refuses what the kubelet's allowlist refuses: a tag,
// a digest, a wildcard anywhere but a whole last segment, a name that is
// not a repository.
func checkAllowlistEntry(entry string) error {
	name := strings.TrimSuffix(entry, "/*")
	if strings.ContainsAny(name, "*@") {
		return fmt.Errorf("allowlist entry %q: want a repository, or a prefix ending in /*, without tag or digest", entry)
	}
	named, err := reference.ParseNamed(name)
	if err != nil {
		return fmt.Errorf("allowlist entry %q: want a repository with its registry, e.g. registry.k8s.io/pause: %w", entry, err)
	}
	if _, tagged := named.(reference.Tagged); tagged {
		return fmt.Errorf("allowlist entry %q: want a repository without a tag", entry)
	}
	return nil
}

// allowlisted says whether repo, a normalised repository name, is on the
// allowlist.
func (v Verification) allowlisted(repo string) bool {
	for _, entry := range v.Allowlist {
		if prefix, ok := strings.CutSuffix(entry, "/*"); ok {
			if strings.HasPrefix(repo, prefix+"/") {
				return true
			}
		} else if repo == entry {
			return true
		}
	}
	return false
}

// owners indexes the agent's proofs by image: which scopes' credentials
// brought an image, by runtime ID and by repository digest.
type owners struct {
	byID, byDigest map[string]map[string]bool
}

func (o *owners) add(scope, id, digest string) {
	if o.byID == nil {
		o.byID, o.byDigest = map[string]map[string]bool{}, map[string]map[string]bool{}
	}
	addScope(o.byID, id, scope)
	addScope(o.byDigest, digestOnly(digest), scope)
}

// addScope notes scope under key, unless key is empty.
func addScope(m map[string]map[string]bool, key, scope string) {
	if key == "" {
		return
	}
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	m[key][scope] = true
}

// of is the scopes whose credentials brought the listed image.
func (o *owners) of(listing pull.PresentImage) map[string]bool {
	out := map[string]bool{}
	for s := range o.byID[listing.ID] {
		out[s] = true
	}
	for s := range o.byDigest[digestOnly(listing.RepoDigest)] {
		out[s] = true
	}
	return out
}

// indexOwners gathers every proof the pass starts from, and every pull
// the engine holds or finished under some credentials, so that an image
// arriving through the agent's own pull is never taken for preloaded.
func (p *planner) indexOwners() {
	for key, pr := range p.in.State.proofs {
		_, scope, _ := strings.Cut(key, " ")
		p.owned.add(scope, pr.id, pr.digest)
	}
	for key, m := range p.in.State.images {
		_, scope, _ := strings.Cut(key, " ")
		p.owned.add(scope, m.verifiedID, m.verifiedDigest)
	}
	for _, st := range p.in.Engine {
		if st.Last != nil && verifies(*st.Last) {
			p.owned.add(st.Last.Tag, st.Last.ImageRef, st.Last.Digest)
		}
	}
}

// preloaded says whether the listed image came to the node by other means
// than this agent's pulls: the agent holds no proof of it under any
// credentials, the runtime carries no mark of such a pull (marks.go), and
// no pull of the reference is under way or done in the engine. It is
// decided when the agent first sees the image and kept while the runtime
// lists it, so an image that arrives during one of the agent's pulls is
// never preloaded.
func (p *planner) preloaded(w *wantedImage, listing pull.PresentImage) bool {
	if was, ok := p.in.State.preloaded[listing.ID]; ok {
		p.out.State.preloaded[listing.ID] = was
		return was
	}
	if p.in.Marks.unknown() {
		return false // decided in a pass that can read the marks
	}
	eng, known := p.in.Engine[w.refKey]
	is := len(p.owned.of(listing)) == 0 && !p.in.Marks.marked(listing) &&
		(!known || (eng.State != pull.StateQueued && eng.State != pull.StatePulling && eng.Last == nil))
	if listing.ID != "" {
		p.out.State.preloaded[listing.ID] = is
	}
	return is
}

// waived says whether the listed image counts as present for the entry
// without a proof of its own, under the operator's policy.
func (p *planner) waived(w *wantedImage, listing pull.PresentImage) bool {
	switch p.in.Verification.Policy {
	case AlwaysVerify:
		return false
	case NeverVerifyAllowlistedImages:
		return p.in.Verification.allowlisted(w.ref.Name())
	case NeverVerify:
		return !p.privateToOthers(w, listing)
	}
	return p.preloaded(w, listing)
}

// privateToOthers says whether the listed image was brought by another
// namespace's pull secrets, or is being pulled with them now.
func (p *planner) privateToOthers(w *wantedImage, listing pull.PresentImage) bool {
	for s := range p.owned.of(listing) {
		if s != "" && s != w.scope {
			return true
		}
	}
	eng, known := p.in.Engine[w.refKey]
	return known && eng.Tag != "" && eng.Tag != w.scope && (eng.State == pull.StateQueued || eng.State == pull.StatePulling)
}
