package plan

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// planBytes hands out fuzz input a few bits at a time; past the end it
// gives zeros.
type planBytes []byte

func (b *planBytes) next(n int) int {
	if len(*b) == 0 {
		return 0
	}
	v := int((*b)[0]) % n
	*b = (*b)[1:]
	return v
}

var fuzzImages = []string{imgA, imgB, "registry.test/team/c:v1", "registry.test/team/d@sha256:" +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}

// fuzzInput builds a pass's input: three ImageWarms over four images, and
// for each image a runtime listing, an engine state, results and memory
// chosen by the data.
func fuzzInput(data []byte, msg string) Input {
	b := planBytes(data)
	var warms []warmv1.ImageWarm
	for i := range 3 {
		var imgs []string
		for _, img := range fuzzImages {
			if b.next(2) == 1 {
				imgs = append(imgs, img)
			}
		}
		iw := warm("ns", fmt.Sprintf("w%d", i), nil, imgs...)
		iw.Spec.Suspend = b.next(4) == 0
		if b.next(3) == 0 {
			iw.Spec.PullPolicy = warmv1.PullAlways
		}
		if b.next(3) == 0 {
			iw.Spec.Artifacts = []warmv1.ImageReference{warmv1.ImageReference(fuzzImages[b.next(len(fuzzImages))])}
		}
		warms = append(warms, iw)
	}
	in := input(warms...)
	in.RuntimeInfo = []warmv1.RuntimeInfo{{}, crio, containerd}[b.next(3)]
	in.Disk.Pressure = b.next(5) == 0
	in.State = State{images: map[string]imageMemory{}, warming: map[types.NamespacedName]warmProgress{}}
	runtime := runtimeImages{}
	for _, img := range fuzzImages {
		fuzzImage(&b, &in, runtime, img, msg)
	}
	in.Runtime = runtime
	fuzzTaint(&b, &in, warms)
	return in
}

// fuzzTaint puts the startup taint on the node or not, lets some active
// ImageWarms hold it, and sets its deadline before, at or after the pass.
func fuzzTaint(b *planBytes, in *Input, warms []warmv1.ImageWarm) {
	for _, iw := range warms {
		if b.next(2) == 1 && !iw.Spec.Suspend {
			in.Desired.holdTaint[types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}] = true
		}
	}
	in.Taint = TaintInput{Key: testTaintKey, OnNode: b.next(3) != 0, Deadline: t0.Add(time.Duration(b.next(3)-1) * time.Minute)}
}

// fuzzImage fills in one image's part of the input.
func fuzzImage(b *planBytes, in *Input, runtime runtimeImages, img, msg string) {
	ref, _ := imageref.Parse(img)
	key := ref.String()
	if b.next(2) == 1 {
		runtime[key] = pull.PresentImage{ID: "sha256:id", Size: 1, RepoDigest: []string{"", key + "@" + testDigest, key + "@" + msg}[b.next(3)]}
	}
	at := t0.Add(time.Duration(b.next(5)-2) * time.Second)
	var last *pull.Result
	switch b.next(4) {
	case 1:
		r := pulled(key, at)
		last = &r
	case 2:
		r := failedPull(key, pull.ClassNotFound, at)
		r.Message = msg
		last = &r
	}
	states := []pull.State{"", pull.StateQueued, pull.StatePulling, pull.StateBackOff, pull.StatePulled}
	if s := states[b.next(len(states))]; s != "" {
		in.Engine[key] = pull.Status{Image: key, Ref: key, State: s, Last: last, RetryAt: at.Add(10 * time.Second)}
	}
	if last != nil && b.next(2) == 1 {
		in.Results = append(in.Results, *last)
	}
	m := imageMemory{seen: b.next(2) == 1, failures: int32(b.next(3))}
	if m.failures > 0 {
		r := failedPull(key, pull.ClassNotFound, t0.Add(-time.Minute))
		m.failed = &r
	}
	in.State.images[key] = m
}

// FuzzPlan checks the planner's promises on any input: no image is
// reported present while a failure is its last word, pulls go only to
// wanted, active images, Warmed goes only to ImageWarms whose images are
// all present, and the next pass is within bounds.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, "registry said no")
	f.Add([]byte{255, 0, 255, 0, 17, 42, 3, 3, 3, 3, 1, 1, 1, 2, 2, 2}, "failed to pull \"a\": <html>&amp;\n\x00é"+strings.Repeat("x", 300))
	f.Fuzz(func(t *testing.T, data []byte, msg string) {
		in := fuzzInput(data, msg)
		out := Decide(in)
		checkPulls(t, in, out)
		checkPresence(t, in, out)
		checkWarmed(t, in, out)
		checkTaint(t, in, out)
		checkEntries(t, in, out)
		checkArtifacts(t, in, out)
		if out.Next < minPass || out.Next > in.Resync {
			t.Errorf("next pass in %v, want within [%v, %v]", out.Next, minPass, in.Resync)
		}
		if n := len(in.Desired.images) + len(in.Desired.invalid); len(out.Status.Images) != n || int(out.Status.Desired) != n {
			t.Errorf("%d images reported (desired %d), want %d", len(out.Status.Images), out.Status.Desired, n)
		}
	})
}

// checkArtifacts: no artifact is pulled where the runtime cannot mount
// it, and no two artifacts pull at once: a new artifact pull only when
// the engine pulls no artifact, and one at most.
func checkArtifacts(t *testing.T, in Input, out Output) {
	busy := false
	for _, w := range in.Desired.images {
		if st, ok := in.Engine[w.refKey]; ok && w.artifact && (st.State == pull.StateQueued || st.State == pull.StatePulling) {
			busy = true
		}
	}
	fresh := map[string]bool{}
	for _, p := range out.Pulls {
		w := in.Desired.images[entryKey(p.refKey, p.Scope)]
		if w == nil || !w.artifact {
			continue
		}
		if !mountsArtifacts(in.RuntimeInfo) {
			t.Errorf("artifact %s pulled on %+v", p.Image, in.RuntimeInfo)
		}
		if st, ok := in.Engine[w.refKey]; !ok || (st.State != pull.StateQueued && st.State != pull.StatePulling) {
			fresh[w.refKey] = true
		}
	}
	if len(fresh) > 1 || (busy && len(fresh) > 0) {
		t.Errorf("new artifact pulls %v beside one under way (%v)", fresh, busy)
	}
}

func checkPulls(t *testing.T, in Input, out Output) {
	seen := map[string]bool{}
	for _, p := range out.Pulls {
		w := in.Desired.images[p.Image]
		if w == nil || w.suspended || seen[p.Image] {
			t.Errorf("pull of %s: unwanted, suspended or twice", p.Image)
		}
		seen[p.Image] = true
	}
}

// checkPresence: Present needs a success newer than the listing, or a
// listing with no failure after the last success.
func checkPresence(t *testing.T, in Input, out Output) {
	for _, img := range out.Status.Images {
		if img.State != warmv1.ImagePresent {
			continue
		}
		var lastSuccess, lastFailure time.Time
		for _, r := range in.Results {
			if r.Ref == img.Image && r.Succeeded() {
				lastSuccess = r.Finished
			} else if r.Ref == img.Image {
				lastFailure = r.Finished
			}
		}
		if s, ok := in.Engine[img.Image]; ok && s.Last != nil && s.Last.Succeeded() {
			lastSuccess = later(lastSuccess, s.Last.Finished)
		} else if ok && s.Last != nil {
			lastFailure = later(lastFailure, s.Last.Finished)
		}
		if m := in.State.images[img.Image]; m.failed != nil {
			lastFailure = later(lastFailure, m.failed.Finished)
		}
		_, listed := in.Runtime.(runtimeImages)[img.Image]
		if lastSuccess.After(in.ListedAt) || (listed && !lastFailure.After(lastSuccess)) {
			continue
		}
		t.Errorf("%s reported Present: listed %v, last success %v, last failure %v", img.Image, listed, lastSuccess, lastFailure)
	}
}

// checkEntries: every entry is one the API takes (plain text within its
// bounds, a valid digest or none), has a transition time unless present,
// and names, by index into status.warms, the ImageWarms that want it.
func checkEntries(t *testing.T, in Input, out Output) {
	for _, img := range out.Status.Images {
		if !plainPattern.MatchString(img.Image) || !plainPattern.MatchString(img.Message) || len(img.Image) > maxImageLength ||
			len(img.Message) > warmv1.MaxNodeMessageLength || (img.Digest != "" && !validDigest.MatchString(img.Digest)) {
			t.Errorf("entry out of the schema: %+v", img)
		}
		if (img.LastTransitionTime == nil) != (img.State == warmv1.ImagePresent) {
			t.Errorf("%s is %s with transition time %v", img.Image, img.State, img.LastTransitionTime)
		}
		w := in.Desired.images[img.Image]
		if w == nil {
			continue // an invalid spec entry
		}
		by := out.Status.RequestedBy(&img)
		if len(by) != min(len(w.warms), warmv1.MaxRequestedBy) || len(by) != len(img.Warms) {
			t.Errorf("%s requested by %v, wanted by %v", img.Image, by, w.warms)
		}
		for i, r := range by {
			if r.Namespace != w.warms[i].Namespace || r.Name != w.warms[i].Name {
				t.Errorf("%s requested by %v, wanted by %v", img.Image, by, w.warms)
			}
		}
	}
}

// plainPattern is the NodeImage message and image fields' pattern.
var plainPattern = regexp.MustCompile(`^[ !#-%'-;=?-\[\]-~]*$`)

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func checkWarmed(t *testing.T, in Input, out Output) {
	state := map[string]warmv1.ImageState{}
	for _, img := range out.Status.Images {
		state[img.Image] = img.State
	}
	for _, e := range out.Events {
		if e.Reason != warmv1.ReasonWarmed {
			continue
		}
		for key, w := range in.Desired.images {
			for _, nn := range w.warms {
				if nn == e.warms[0] && state[key] != warmv1.ImagePresent {
					t.Errorf("Warmed on %s while %s is %s", nn, key, state[key])
				}
			}
		}
	}
}

// checkTaint: the taint is removed only from a node that has it, and
// before the deadline only when every image of every ImageWarm holding it
// is present; a node that keeps it is reported Waiting.
func checkTaint(t *testing.T, in Input, out Output) {
	c := meta.FindStatusCondition(out.Status.Conditions, warmv1.ConditionStartupTaint)
	switch {
	case out.RemoveTaint && !in.Taint.OnNode:
		t.Error("removing a taint the node does not have")
	case !out.RemoveTaint && in.Taint.OnNode && (c == nil || c.Reason != warmv1.ReasonTaintWaiting):
		t.Errorf("tainted node kept with condition %+v, want Waiting", c)
	case !in.Taint.OnNode && c != nil:
		t.Errorf("untainted node with no history has condition %+v", c)
	}
	if !out.RemoveTaint || !in.Now.Before(in.Taint.Deadline) {
		return
	}
	for _, img := range out.Status.Images {
		for _, w := range out.Status.RequestedBy(&img) {
			by := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
			if in.Desired.holdTaint[by] && img.State != warmv1.ImagePresent {
				t.Errorf("taint removed before the deadline while %s of %s is %s", img.Image, by, img.State)
			}
		}
	}
}
