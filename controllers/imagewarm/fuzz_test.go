package imagewarm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// fuzzBytes hands out the fuzzer's bytes one decision at a time; past the
// end every decision is 0.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) next(n int) int {
	if len(f.b) == 0 || n <= 0 {
		return 0
	}
	v := int(f.b[0]) % n
	f.b = f.b[1:]
	return v
}

var fuzzStates = []warmv1.ImageState{warmv1.ImagePresent, warmv1.ImagePulling, warmv1.ImageQueued,
	warmv1.ImageBackOff, warmv1.ImageFailed, warmv1.ImageSkipped}

// fuzzFleet builds an ImageWarm of up to 100 images (some spelled alike)
// and up to 40 nodes, some unselected, some silent or on an old generation,
// whose reports hold any states, unknown and repeated images, and long
// messages, within the NodeWarm schema.
func fuzzFleet(data []byte, text string) (*warmv1.ImageWarm, []metav1.PartialObjectMetadata, []warmv1.NodeWarm) {
	fb := &fuzzBytes{b: data}
	pool := []string{"nginx", "nginx:latest", "docker.io/library/nginx", "redis:7", "r.io/a/b:v1", "r.io/a/b@sha256:" + strings.Repeat("a", 64), "busybox"}
	n := 1 + fb.next(warmv1.MaxImagesPerWarm)
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: int64(1 + fb.next(3))}}
	seen := map[string]bool{}
	for i := range n {
		img := pool[fb.next(len(pool))]
		if seen[img] {
			img = fmt.Sprintf("r.io/img-%d:v1", i)
		}
		seen[img] = true
		iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(img))
	}
	if fb.next(2) == 1 {
		iw.Spec.NodeSelector = iwZone("a")
	}
	iw.Spec.Suspend = fb.next(4) == 0
	// The API server hands out valid UTF-8 only: it replaces bad bytes.
	msg := strings.ToValidUTF8(text, "\uFFFD")
	if r := []rune(msg); len(r) > warmv1.MaxMessageLength {
		msg = string(r[:warmv1.MaxMessageLength])
	}
	var nodes []metav1.PartialObjectMetadata
	var reports []warmv1.NodeWarm
	for i := range fb.next(40) {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, iwNodeMeta(name, "zone", []string{"a", "b"}[fb.next(2)]))
		if fb.next(5) == 0 {
			continue // no report
		}
		warms := []warmv1.WarmRef{{Namespace: "default", Name: "web", Generation: iw.Generation - int64(fb.next(2))}}
		var imgs []warmv1.NodeImage
		for range fb.next(2 * n) {
			ref := reportKey(string(iw.Spec.Images[fb.next(n)]))
			if fb.next(8) == 0 {
				ref = "r.io/unwanted:v1"
			}
			st := fuzzStates[fb.next(len(fuzzStates))]
			imgs = append(imgs, warmv1.NodeImage{Image: ref, State: st, Reason: []string{"", "NotFound", "Unauthorized", "NoMatchingPlatform"}[fb.next(4)],
				Message: msg, Digest: []string{"", iwDigestA, iwDigestB}[fb.next(3)]})
		}
		reports = append(reports, iwReport(name, warms, imgs...))
	}
	return iw, nodes, reports
}

// FuzzAggregateStatus folds arbitrary NodeWarms into an ImageWarm status and
// checks that the counts add up, the status stays within the API's bounds,
// and the result does not depend on the order the nodes come in.
func FuzzAggregateStatus(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 0, 1, 9, 1, 1, 4, 2, 1, 5, 7}, "401 Unauthorized")
	f.Add([]byte{99, 0, 0, 1, 39, 1, 1, 1, 200, 4, 4, 4, 4}, strings.Repeat("é", 600))
	f.Add([]byte{0}, "")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		iw, nodes, reports := fuzzFleet(data, text)
		st, err := aggregateStatus(iw, newFleet(nodes, reports))
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, iw, nodes, st)
		checkBounds(t, st)
		slices.Reverse(nodes)
		slices.Reverse(reports)
		again, err := aggregateStatus(iw, newFleet(nodes, reports))
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(dropTimes(st), dropTimes(again)) {
			t.Fatalf("node order changed the status:\n%+v\n%+v", st, again)
		}
	})
}

func checkCounts(t *testing.T, iw *warmv1.ImageWarm, nodes []metav1.PartialObjectMetadata, st warmv1.ImageWarmStatus) {
	t.Helper()
	sel, _ := iw.Spec.NodeSelector.AsNodeSelector()
	matching := int32(0)
	for _, n := range nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			matching++
		}
	}
	c := st.Nodes
	if c.Matching != matching || c.Ready+c.Pulling+c.Failed+c.NotReporting+c.Unsupported != c.Matching {
		t.Fatalf("node counts %+v, %d matching", c, matching)
	}
	if int(st.ImageCount) != len(iw.Spec.Images) {
		t.Fatalf("imageCount %d for %d in the spec", st.ImageCount, len(iw.Spec.Images))
	}
	failing := checkListedImages(t, iw, st)
	want := min(int(failing), warmv1.MaxReportedFailures)
	if len(st.Failures) != want && (len(st.Images) < warmv1.MaxReportedImages || len(st.Failures) < want) {
		t.Fatalf("%d failures listed, %d failing pairs among the images listed", len(st.Failures), failing)
	}
	ready := condStatus(st, warmv1.ConditionReady)
	if (ready == metav1.ConditionTrue) != (c.Matching > c.Unsupported && c.Ready == c.Matching-c.Unsupported) {
		t.Fatalf("Ready %s with nodes %+v", ready, c)
	}
	if ready == metav1.ConditionTrue && st.ReadyImages != st.ImageCount {
		t.Fatalf("Ready with %d/%d images ready", st.ReadyImages, st.ImageCount)
	}
	if (condStatus(st, warmv1.ConditionDegraded) == metav1.ConditionTrue) != (c.Failed > 0) {
		t.Fatalf("Degraded %s with nodes %+v", condStatus(st, warmv1.ConditionDegraded), c)
	}
}

// checkListedImages checks that the images listed are, in spec order, the
// first ones some node lacks or whose digests differ, that their counts add
// up, and that with the rest they account for every spec image. It returns
// the failures counted in the images listed.
func checkListedImages(t *testing.T, iw *warmv1.ImageWarm, st warmv1.ImageWarmStatus) int32 {
	t.Helper()
	c := st.Nodes
	failing, lacking, prev := int32(0), 0, -1
	for _, img := range st.Images {
		i := slices.Index(iw.Spec.Images, warmv1.ImageReference(img.Image))
		if i <= prev || img.Ready+img.Pulling+img.Failed+img.Unsupported != c.Matching-c.NotReporting {
			t.Fatalf("image %d %+v after %d, nodes %+v", i, img, prev, c)
		}
		if img.Ready == c.Matching && !img.DigestsDiffer {
			t.Fatalf("image %+v listed though every node has it", img)
		}
		if img.Ready < c.Matching {
			lacking++
		}
		prev = i
		failing += img.Failed
	}
	switch {
	case len(st.Images) > warmv1.MaxReportedImages:
		t.Fatalf("%d images listed", len(st.Images))
	case c.Matching == 0 && (st.ReadyImages != 0 || len(st.Images) != 0):
		t.Fatalf("no node matches, yet %d images ready and %d listed", st.ReadyImages, len(st.Images))
	case c.Matching > 0 && len(st.Images) < warmv1.MaxReportedImages && int(st.ReadyImages)+lacking != len(iw.Spec.Images):
		t.Fatalf("%d images ready and %d lacking, of %d", st.ReadyImages, lacking, len(iw.Spec.Images))
	}
	return failing
}

// checkBounds checks the status against the ImageWarm schema's limits.
func checkBounds(t *testing.T, st warmv1.ImageWarmStatus) {
	t.Helper()
	if len(st.Images) > warmv1.MaxReportedImages || len(st.Failures) > warmv1.MaxReportedFailures || len(st.Conditions) > 8 {
		t.Fatalf("lists too long: %d images, %d failures, %d conditions", len(st.Images), len(st.Failures), len(st.Conditions))
	}
	for i, f := range st.Failures {
		if len(f.Message) > warmv1.MaxMessageLength || !utf8.ValidString(f.Message) || len(f.Reason) > 64 || f.Reason == "" ||
			len(f.Image) > 512 || len(f.Node) > 253 {
			t.Fatalf("failure out of bounds: %d-byte message, reason %q", len(f.Message), f.Reason)
		}
		if i > 0 && f.Node < st.Failures[i-1].Node {
			t.Fatalf("failures not in node order: %s after %s", f.Node, st.Failures[i-1].Node)
		}
	}
	for _, c := range st.Conditions {
		if c.Reason == "" || len(c.Reason) > 1024 || len(c.Message) > warmv1.MaxConditionMessageLength || c.Status == "" {
			t.Fatalf("condition out of bounds: %+v", c)
		}
	}
}

func condStatus(st warmv1.ImageWarmStatus, typ string) metav1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// dropTimes blanks the conditions' transition times, which differ between
// two calls.
func dropTimes(st warmv1.ImageWarmStatus) warmv1.ImageWarmStatus {
	st.Conditions = slices.Clone(st.Conditions)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return st
}
