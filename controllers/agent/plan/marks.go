package plan

import (
	"slices"
	"strings"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// An image this agent pulled with a namespace's pull secrets is never
// "preloaded" (verification.go), but the agent's proofs live in its
// memory and in its NodeWarm's entries, and both go: a restart forgets
// the proofs of ImageWarms deleted in the hour before, and a NodeWarm
// deleted by hand takes every entry with it. So the agent also marks such
// an image on the node, in the runtime's own record of it (containerd's
// image labels, criclient.Marker), and a marked image is never taken for
// preloaded. A pull of the same image through CRI (the kubelet's) drops
// containerd's labels, so the agent marks again, every pass, each image it
// holds a proof of under pull secrets.

// MarkView is what a pass knows of the runtime's marks.
type MarkView struct {
	// Unable says why the runtime cannot mark images (CRI-O, containerd
	// without its images API); "" when it can.
	Unable string
	// Digests are the manifest or index digests of the marked images.
	Digests map[string]bool
	// Problem is why the marks could not be listed; "" for none. The
	// marks are then unknown, and no image counts as preloaded in that
	// pass.
	Problem string
}

// unknown says whether the runtime can mark but its marks could not be
// read.
func (v MarkView) unknown() bool { return v.Unable == "" && v.Problem != "" }

// marked says whether the listed image carries the mark.
func (v MarkView) marked(listing pull.PresentImage) bool {
	d := digestOnly(listing.RepoDigest)
	return d != "" && v.Digests[d]
}

// marks asks the shell to mark each present image that some proof under
// pull secrets brought, unless it is marked already.
func (p *planner) marks() {
	if p.in.Marks.Unable != "" || p.in.Marks.Problem != "" || p.in.Runtime == nil {
		return
	}
	for key, pr := range p.out.State.proofs {
		refKey, scope, _ := strings.Cut(key, " ")
		if scope == "" || pr.digest == "" || p.in.Marks.Digests[pr.digest] || slices.Contains(p.out.Marks, refKey) {
			continue
		}
		ref, err := imageref.Parse(refKey)
		if err != nil {
			continue
		}
		if listing, ok := p.in.Runtime.Lookup(ref); ok && digestOnly(listing.RepoDigest) == pr.digest {
			p.out.Marks = append(p.out.Marks, refKey)
		}
	}
	slices.Sort(p.out.Marks)
}
