package pullengine

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// digestB is another image of a repository; the fake resolves every tag to
// digestA.
const digestB = "sha256:0000000000000000000000000000000000000000000000000000000000000002"

// TestOnePullPerImageHoweverNamed asks, in one Sync, for one image by
// digest, by tag@digest, by tag, and by the short and full spellings of
// each, digest first: the runtime pulls it once, by tag, and the digest's
// job finishes from the runtime's record of that pull.
func TestOnePullPerImageHoweverNamed(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 4})
	tag, digest := key(t, "app:v1"), key(t, "app@"+digestA)
	release := h.svc.block(tag)
	reqs := []Request{{Image: "app@" + digestA}, {Image: "docker.io/library/app:v1@" + digestA},
		{Image: "app:v1"}, {Image: "library/app:v1"}, {Image: "docker.io/library/app@" + digestA}}
	for i, st := range h.eng.Sync(h.ctx, reqs) {
		if st.State != pull.StateQueued {
			t.Fatalf("%s: %s, want Queued", reqs[i].Image, st.State)
		}
	}
	h.svc.waitStarted(t, tag) // the tag first, although asked for last
	select {
	case ref := <-h.svc.started:
		t.Fatalf("%s pulled while its repository's tag was being pulled", ref)
	case <-time.After(50 * time.Millisecond):
	}
	if st, _ := h.eng.Status("app@" + digestA); st.State != pull.StateQueued {
		t.Fatalf("digest %s while the tag is pulled, want Queued", st.State)
	}
	release()
	got := map[string]Result{}
	for range 2 {
		r := h.result(t)
		got[r.Ref] = r
	}
	h.noResult(t)
	if pulls := h.svc.pulled(); !reflect.DeepEqual(pulls, []string{tag}) {
		t.Fatalf("PullImage calls %q, want one, of %s", pulls, tag)
	}
	d := got[digest]
	if !d.Succeeded() || d.Attempts != 0 || d.ImageRef != got[tag].ImageRef || d.Digest != digest || d.Size != 42<<20 {
		t.Fatalf("digest's result %+v, want the tag's image without a pull", d)
	}
	if st, _ := h.eng.Status("app:v1@" + digestA); st.State != pull.StatePulled {
		t.Fatalf("Status(tag@digest) = %s, want Pulled", st.State)
	}
}

// TestDigestFirstByPriority checks that priorities hold over the tag-first
// rule: a digest asked for with a higher priority is pulled first, and the
// tag after it, never both at once.
func TestDigestFirstByPriority(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 4})
	tag, digest := key(t, "app:v1"), key(t, "app@"+digestA)
	release := h.svc.block(digest)
	h.eng.Sync(h.ctx, []Request{{Image: "app:v1"}, {Image: "app@" + digestA, Priority: 5}})
	h.svc.waitStarted(t, digest)
	release()
	h.svc.waitStarted(t, tag)
	h.result(t)
	h.result(t)
	// A pull by digest records no tag: the tag needs its own pull.
	if pulls := h.svc.pulled(); !reflect.DeepEqual(pulls, []string{digest, tag}) || h.svc.maxInFlight != 1 {
		t.Fatalf("PullImage calls %q, %d at once; want the digest, then the tag", pulls, h.svc.maxInFlight)
	}
}

// TestRepositoryOneAtATime checks that a second tag of a repository waits
// for the first while other repositories' pulls go on, and that a parked
// job can be cancelled.
func TestRepositoryOneAtATime(t *testing.T) {
	h := newHarness(t, Options{MaxParallelPulls: 3})
	v1, v2, other := key(t, "app:v1"), key(t, "app:v2"), key(t, "other:v1")
	releaseV1 := h.svc.block(v1)
	h.enqueue("app:v1", 0)
	h.svc.waitStarted(t, v1)
	h.enqueue("app:v2", 9) // higher priority, but its repository is busy
	h.enqueue("app:v3", 0)
	h.enqueue("other:v1", 0)
	h.svc.waitStarted(t, other)
	if r := h.result(t); r.Ref != other || !r.Succeeded() {
		t.Fatalf("got %+v, want %s pulled beside app:v1", r, other)
	}
	if !h.eng.Cancel("app:v3") {
		t.Fatal("Cancel(app:v3) found nothing")
	}
	if r := h.result(t); r.Class != pull.ClassCanceled || r.Image != "app:v3" {
		t.Fatalf("got %+v, want app:v3 cancelled", r)
	}
	if st, _ := h.eng.Status("app:v2"); st.State != pull.StateQueued {
		t.Fatalf("app:v2 %s while app:v1 pulls, want Queued", st.State)
	}
	releaseV1()
	h.svc.waitStarted(t, v2)
	h.result(t)
	h.result(t)
	if pulls := h.svc.pulled(); !reflect.DeepEqual(pulls, []string{v1, other, v2}) {
		t.Fatalf("PullImage calls %q", pulls)
	}
	if v := value(t, h.eng.metrics.pullsQueued); v != 0 {
		t.Fatalf("%v pulls counted as queued after all ended", v)
	}
	h.eng.mu.Lock()
	defer h.eng.mu.Unlock()
	if len(h.eng.repos) != 0 || len(h.eng.jobs) != 0 {
		t.Fatalf("engine still tracks repositories %v, jobs %v", h.eng.repos, h.eng.jobs)
	}
}

// TestStaleRecordNotTaken: a digest the runtime lists from before (an image
// record containerd keeps after a failed pull, say), not brought by the
// sibling pull that just ended, is pulled.
func TestStaleRecordNotTaken(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	digest := key(t, "app@"+digestB)
	h.svc.images["sha256:stale"] = &runtimeapi.Image{Id: "sha256:stale", RepoDigests: []string{digest}}
	h.eng.Sync(h.ctx, []Request{{Image: "app@" + digestB}, {Image: "app:v1"}})
	h.result(t)
	if r := h.result(t); r.Ref != digest || r.Attempts != 1 || r.ImageRef != "sha256:id-"+digest {
		t.Fatalf("digest's result %+v, want it pulled", r)
	}
	if !slices.Contains(h.svc.statusCalls, digest) {
		t.Fatalf("ImageStatus calls %q: the digest was not looked up", h.svc.statusCalls)
	}
}

// TestTagIsNotLookedUp: a tag the runtime holds is pulled when asked for
// (a refresh), even right after another pull of its repository: only
// digests are taken from a sibling's pull.
func TestTagIsNotLookedUp(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	tag := key(t, "app:v1")
	h.svc.images["sha256:old"] = &runtimeapi.Image{Id: "sha256:old", RepoTags: []string{tag}}
	h.eng.Sync(h.ctx, []Request{{Image: "app@" + digestA, Priority: 1}, {Image: "app:v1"}})
	h.result(t)
	if r := h.result(t); r.Ref != tag || r.Attempts != 1 {
		t.Fatalf("tag's result %+v, want it pulled", r)
	}
	if slices.Contains(h.svc.statusCalls, tag) {
		t.Fatal("the tag was looked up instead of pulled")
	}
}

// TestSyncQueuesTogether: the requests of one Sync enter the queue at once,
// so a free slot takes the highest priority among them, not the first.
func TestSyncQueuesTogether(t *testing.T) {
	h := newHarness(t, Options{SerializePulls: true})
	h.eng.Sync(h.ctx, []Request{{Image: "low"}, {Image: "mid", Priority: 1}, {Image: "high", Priority: 2}})
	for range 3 {
		h.result(t)
	}
	want := []string{key(t, "high"), key(t, "mid"), key(t, "low")}
	if got := h.svc.pulled(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pull order %q, want %q", got, want)
	}
}
