package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// The NodeWarm's size budget (api/v1alpha1/limits.go), measured on what the
// planner writes.

// budgetDigest is a distinct digest per image.
func budgetDigest(i int) string {
	return fmt.Sprintf("sha256:%064x", 0xfeed0000+i)
}

// budgetInput is a node wanted by three ImageWarms: one of every image,
// two of half each, as teams split their images. present says how each
// image (by index) stands.
func budgetInput(refs []string, state func(i int) warmv1.ImageState) Input {
	in := input(warm("platform", "base-images", nil, refs...),
		warm("team-a", "web", nil, refs[:len(refs)/2]...),
		warm("team-b", "batch", nil, refs[len(refs)/2:]...))
	rt := runtimeImages{}
	for i, r := range refs {
		ref, _ := imageref.Parse(r)
		key := ref.String()
		switch state(i) {
		case warmv1.ImagePresent:
			rt[key] = pullengine.PresentImage{ID: "sha256:id", RepoDigest: ref.Name() + "@" + budgetDigest(i), Size: 123_456_789 + uint64(i)}
		case warmv1.ImagePulling:
			in.Engine[key] = pullengine.Status{Image: key, Ref: key, State: pull.StatePulling}
		case warmv1.ImageBackOff:
			res := failedPull(key, pull.ClassNotFound, t0.Add(-time.Second))
			res.Message = fmt.Sprintf(`failed to pull and unpack image "%s": failed to resolve reference "%s": %s: not found`, r, r, r)
			in.Engine[key] = backingOff(res)
			in.Results = append(in.Results, res)
		}
	}
	in.Runtime = rt
	return in
}

// nodeWarmBytes is what a status takes as stored, and per image.
func nodeWarmBytes(t testing.TB, st warmv1.NodeWarmStatus) (int, float64) {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(b), float64(len(b)) / float64(len(st.Images))
}

// TestNodeWarmBudget checks that a report of 100 images takes at most
// NodeImageBudget bytes an image, all of the status counted, once they are
// present and while they are being pulled; and that a present image's
// entry still says what an operator needs: state, digest and who wants it.
func TestNodeWarmBudget(t *testing.T) {
	refs := build.RealisticRefs(warmv1.MaxImagesPerWarm)
	for _, c := range []struct {
		name  string
		state func(int) warmv1.ImageState
	}{
		{"all present", func(int) warmv1.ImageState { return warmv1.ImagePresent }},
		{"pulling", func(i int) warmv1.ImageState {
			return []warmv1.ImageState{warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageQueued}[i%3]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := decide(budgetInput(refs, c.state)).Status
			size, perImage := nodeWarmBytes(t, st)
			t.Logf("%d images: %d bytes, %.0f an image", len(st.Images), size, perImage)
			if len(st.Images) != len(refs) || perImage > warmv1.NodeImageBudget {
				t.Errorf("%d images take %d bytes, %.0f an image; the budget is %d", len(st.Images), size, perImage, warmv1.NodeImageBudget)
			}
		})
	}
	st := decide(budgetInput(refs, func(int) warmv1.ImageState { return warmv1.ImagePresent })).Status
	img := st.Images[0]
	by := st.RequestedBy(&img)
	if img.State != warmv1.ImagePresent || !strings.HasPrefix(img.Digest, "sha256:") || len(by) != 2 ||
		by[0].Name != "base-images" {
		t.Errorf("entry %+v, requested by %+v: want state, digest and two ImageWarms", img, by)
	}
}

// TestNodeWarmFailingEntry shows what a failing image costs: its message
// and transition time are kept, in plain text, within the schema's bounds.
func TestNodeWarmFailingEntry(t *testing.T) {
	refs := build.RealisticRefs(10)
	st := decide(budgetInput(refs, func(int) warmv1.ImageState { return warmv1.ImageBackOff })).Status
	for _, img := range st.Images {
		if img.State != warmv1.ImageBackOff || img.Reason != "NotFound" || img.LastTransitionTime == nil ||
			!strings.HasPrefix(img.Message, "failed to pull and unpack image '") || !strings.HasSuffix(img.Message, ": not found") || len(img.Message) > warmv1.MaxNodeMessageLength {
			t.Fatalf("entry %+v", img)
		}
	}
	size, perImage := nodeWarmBytes(t, st)
	t.Logf("%d failing images: %d bytes, %.0f an image", len(st.Images), size, perImage)
}

// BenchmarkNodeWarmSize reports the bytes an image takes in a NodeWarm of
// 100 present images (make bench's "B/image" row); it measures size, not
// time.
func BenchmarkNodeWarmSize(b *testing.B) {
	refs := build.RealisticRefs(warmv1.MaxImagesPerWarm)
	in := budgetInput(refs, func(int) warmv1.ImageState { return warmv1.ImagePresent })
	var perImage float64
	for b.Loop() {
		_, perImage = nodeWarmBytes(b, decide(in).Status)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(perImage, "B/image")
}

// TestPlainText checks the mapping of runtime text onto the characters a
// NodeWarm entry takes, and where a long message is cut.
func TestPlainText(t *testing.T) {
	long := `failed to pull and unpack image "` + strings.Repeat("r", 300) + `": not found`
	for _, c := range []struct{ in, want string }{
		{`a "b" <c> & d\e`, `a 'b' (c) + d/e`},
		{"line\nbreak\ttab\x00é", "line break tab??"},
		{long, "failed to pull and unpack image '" + strings.Repeat("r", 76) + " ... " + strings.Repeat("r", 98) + "': not found"},
		{strings.Repeat("é", 10000) + "END", strings.Repeat("?", 109) + " ... " + strings.Repeat("?", 107) + "END"},
	} {
		got := statusMessage(c.in)
		if got != c.want || len(got) > warmv1.MaxNodeMessageLength || !plainPattern.MatchString(got) {
			t.Errorf("statusMessage(%.40q) = %q, want %q", c.in, got, c.want)
		}
	}
}
