package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// markedPull is namespace a's pull of imgA, with the digest the runtime
// reports for it.
func markedPull(finished time.Time) pull.Result {
	res := scoped("a", finished)
	res.Digest = imgA + "@" + testDigest
	return res
}

// TestMarksAskedForProofs: an image a pull under namespace a's secrets
// brought is marked, once the runtime lists it with the pulled digest,
// until the runtime reports the mark; pulls without secrets are not
// marked, nor anything where the runtime cannot mark or its marks are
// unknown.
func TestMarksAskedForProofs(t *testing.T) {
	in := policyInput(Verification{})
	in.Runtime = listed(imgA)
	in.Results = []pull.Result{markedPull(t0.Add(-time.Second))}
	in.Marks = MarkView{Digests: map[string]bool{}}
	if out := Decide(in); !slices.Equal(out.Marks, []string{imgA}) {
		t.Errorf("marks %v after a's pull, want [%s]", out.Marks, imgA)
	}
	for name, view := range map[string]MarkView{
		"marked already": {Digests: map[string]bool{testDigest: true}},
		"cannot mark":    {Unable: "runtime cri-o"},
		"marks unknown":  {Problem: "images.List: unavailable"},
	} {
		in.Marks = view
		if out := Decide(in); len(out.Marks) != 0 {
			t.Errorf("%s: marks %v, want none", name, out.Marks)
		}
	}
	in.Marks = MarkView{Digests: map[string]bool{}}
	nodeWide := pulled(imgA, t0.Add(-time.Second))
	nodeWide.Digest = imgA + "@" + testDigest
	in.Results = []pull.Result{nodeWide}
	if out := Decide(in); len(out.Marks) != 0 {
		t.Errorf("a pull without secrets: marks %v, want none", out.Marks)
	}
}

// TestMarkedNeverPreloaded: after a restart (no proofs, no state), an
// image the runtime reports marked is not preloaded: under the default
// policy every entry proves its own access, where an unmarked image counts
// for all. While the marks cannot be read, no image counts as preloaded,
// and the choice is made again once they can.
func TestMarkedNeverPreloaded(t *testing.T) {
	in := policyInput(Verification{})
	in.Runtime = listed(imgA)
	in.Marks = MarkView{Digests: map[string]bool{testDigest: true}}
	if got := askedScopes(t, Decide(in)); got != "() (a) (b)" {
		t.Errorf("marked: entries not present %q, want all", got)
	}
	in.Marks = MarkView{Problem: "images.List: unavailable"}
	unknown := Decide(in)
	if got := askedScopes(t, unknown); got != "() (a) (b)" {
		t.Errorf("marks unknown: entries not present %q, want all", got)
	}
	in.State, in.Marks = unknown.State, MarkView{Digests: map[string]bool{}}
	if got := askedScopes(t, Decide(in)); got != "" {
		t.Errorf("unmarked, after a pass that could not read the marks: entries not present %q, want none", got)
	}
}
