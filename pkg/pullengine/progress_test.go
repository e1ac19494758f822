package pullengine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// fakeContent is a content store whose ingests the test moves by hand: a
// registry that stops sending at a chosen byte cannot be had from a real
// containerd on cue, nor a reading at a chosen instant of a fake clock.
// The real store is read in the bed's tests (bed_integration_test.go).
type fakeContent struct {
	mu        sync.Mutex
	manifests []content.Blob            // of the one repository the test pulls
	byRepo    map[string][]content.Blob // of other repositories, when set
	raw       map[string]string
	held      map[string]content.Blob
	ingests   map[string]int64
	foreignAt map[string]time.Time // when a blob was last written, where it matters
	// kept records each Keep: the lease, the ingests' refs and the blobs.
	kept []keptCall
}

// keptCall is one Keep the engine asked of the store.
type keptCall struct {
	id            string
	refs, digests []string
}

func (f *fakeContent) Keep(_ context.Context, id string, refs, digests []string, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kept = append(f.kept, keptCall{id: id, refs: refs, digests: digests})
	return nil
}

func (f *fakeContent) Release(context.Context, string) error { return nil }

func (f *fakeContent) Ingests(context.Context) ([]content.Ingest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []content.Ingest
	for d, n := range f.ingests {
		out = append(out, content.Ingest{Ref: "ingest-" + d, Digest: d, Offset: n, UpdatedAt: f.foreignAt[d]})
	}
	return out, nil
}

func (f *fakeContent) Manifests(_ context.Context, _, repo string) ([]content.Blob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ms, ok := f.byRepo[repo]; ok {
		return ms, nil
	}
	return f.manifests, nil
}

func (f *fakeContent) Blob(_ context.Context, d string) (content.Blob, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.held[d]
	return b, ok, nil
}

func (f *fakeContent) Read(_ context.Context, d string, _ int64) ([]byte, error) {
	return []byte(f.raw[d]), nil
}

func (f *fakeContent) write(d string, n int64) {
	f.mu.Lock()
	f.ingests[d] = n
	f.mu.Unlock()
}

const (
	cfgDigest = "sha256:c0"
	l1Digest  = "sha256:a1"
	l2Digest  = "sha256:a2"
)

// newFakeContent holds a manifest of a 10-byte config (held before the
// pull) and layers of 1000 and 500 bytes (not held), labelled at labelled.
func newFakeContent(labelled time.Time) *fakeContent {
	return &fakeContent{
		manifests: []content.Blob{
			{Digest: "sha256:old", UpdatedAt: labelled.Add(-time.Hour)},
			{Digest: "sha256:m", UpdatedAt: labelled},
		},
		raw: map[string]string{"sha256:m": `{"config":{"digest":"` + cfgDigest + `","size":10},"layers":[` +
			`{"digest":"` + l1Digest + `","size":1000},{"digest":"` + l2Digest + `","size":500}]}`},
		held:      map[string]content.Blob{cfgDigest: {Digest: cfgDigest, Size: 10, CreatedAt: labelled.Add(-time.Hour)}},
		ingests:   map[string]int64{},
		foreignAt: map[string]time.Time{},
	}
}

// reading moves the fake clock by a second and waits for the watcher to
// have taken its reading (it sets its timer again after).
func (h *harness) reading(t *testing.T) {
	t.Helper()
	h.clock.Step(time.Second)
	h.waitTimers(t, 2) // the pull's timeout and the watcher's
}

// TestProgressAndStall follows a pull's bytes through the content store
// and cancels it as Stalled once they stop moving for the stall timeout.
func TestProgressAndStall(t *testing.T) {
	content := newFakeContent(time.Unix(1_000_000, 0))
	h := newHarness(t, Options{Content: content, StallTimeout: 30 * time.Second})
	img := "reg.example/app:v1"
	h.pulling(t, img)
	h.waitTimers(t, 2)

	content.write(l1Digest, 100)
	h.reading(t)
	want := func(done int64, moving bool) {
		t.Helper()
		s, _ := h.eng.Status(img)
		p := s.Progress
		if p == nil || !p.Known || p.Total != 1510 || p.Done != done {
			t.Fatalf("progress %+v, want %d of 1510 bytes", p, done)
		}
		if _, ok := p.Left(); ok != moving {
			t.Errorf("Left() known = %v, want %v (rate %v)", ok, moving, p.Rate)
		}
	}
	want(110, false) // the config was held: it counts as done
	content.write(l1Digest, 600)
	h.reading(t)
	want(610, true)

	for range 29 {
		h.reading(t)
	}
	h.noResult(t)
	h.clock.Step(time.Second)
	res := h.result(t)
	if res.Class != pull.ClassStalled || !strings.Contains(res.Message, "no bytes arrived for 30s, at 610 B of 1.5 KiB") {
		t.Fatalf("result %+v, want Stalled naming the timeout and the bytes", res)
	}
	if res.RetryAt.IsZero() {
		t.Error("a stalled pull does not back off")
	}
	// The config was there before the pull: only the layer's bytes came.
	if got := testutil.ToFloat64(h.eng.metrics.fetchedBytes); got != 600 {
		t.Errorf("fetched bytes %v, want 600", got)
	}
}

// TestProgressUnknownDoesNotStall: a pull whose manifest the store does
// not show (labelled before the pull started: another pull's) has no
// progress to go by and is left to the pull timeout.
func TestProgressUnknownDoesNotStall(t *testing.T) {
	content := newFakeContent(time.Unix(1_000_000, 0).Add(-time.Minute))
	h := newHarness(t, Options{Content: content, StallTimeout: 5 * time.Second})
	img := "reg.example/app:v1"
	release := h.pulling(t, img)
	h.waitTimers(t, 2)
	for range 10 {
		h.reading(t)
	}
	h.noResult(t)
	if s, _ := h.eng.Status(img); s.Progress == nil || s.Progress.Known {
		t.Errorf("progress %+v, want read but unknown", s.Progress)
	}
	release()
	if res := h.result(t); !res.Succeeded() {
		t.Fatalf("result %+v, want success", res)
	}
}

// TestManifestBlobs reads Docker's and OCI's manifests and refuses what is
// not one.
func TestManifestBlobs(t *testing.T) {
	got, err := manifestBlobs([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"config":{"digest":"sha256:c","size":7},"layers":[{"digest":"sha256:l","size":9}]}`))
	if err != nil || len(got) != 2 || got[0] != (blobSize{"sha256:c", 7}) || got[1] != (blobSize{"sha256:l", 9}) {
		t.Errorf("manifestBlobs = %+v, %v", got, err)
	}
	for _, bad := range []string{`{"manifests":[]}`, `not json`} {
		if _, err := manifestBlobs([]byte(bad)); err == nil {
			t.Errorf("manifestBlobs(%s) succeeded", bad)
		}
	}
}

// TestProgressCountsTheRestOnSuccess: bytes that arrive after the last
// reading of a pull that then succeeds are counted as fetched all the
// same, and a blob held before the pull never is.
func TestProgressCountsTheRestOnSuccess(t *testing.T) {
	content := newFakeContent(time.Unix(1_000_000, 0))
	h := newHarness(t, Options{Content: content})
	img := "reg.example/app:v1"
	release := h.pulling(t, img)
	h.waitTimers(t, 2)
	content.write(l1Digest, 400)
	h.reading(t)
	release()
	if res := h.result(t); !res.Succeeded() || res.Fetched != 1500 {
		t.Fatalf("result %+v, want a success that fetched the two layers' 1500 bytes", res)
	}
	h.clock.Step(time.Second) // the watcher's next reading closes the pull's track
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(h.eng.metrics.fetchedBytes) != 1500 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(h.eng.metrics.fetchedBytes); got != 1500 {
		t.Errorf("fetched bytes %v, want the two layers' 1500", got)
	}
}

// TestLastLook: a pull that ends before any reading (a small image on a
// fast link) is looked at once as it ends: the layers committed since it
// started are what it fetched.
func TestLastLook(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	for _, d := range []string{l1Digest, l2Digest} {
		store.held[d] = content.Blob{Digest: d, CreatedAt: start}
	}
	h := newHarness(t, Options{Content: store})
	h.enqueue("reg.example/app:v1", 0)
	if res := h.result(t); !res.Succeeded() || res.Fetched != 1500 {
		t.Fatalf("result %+v, want a success that fetched the two layers' 1500 bytes", res)
	}
}
