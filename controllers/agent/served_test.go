package agent

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// fakeContainers is a runtime's container list the test writes: which
// containers exist, and when each was created, on cue. The real runtime
// is counted on the real node (test/cluster).
type fakeContainers struct {
	list  []*runtimeapi.Container
	calls int
}

func (f *fakeContainers) ListContainers(context.Context) ([]*runtimeapi.Container, error) {
	f.calls++
	return f.list, nil
}

func container(id, image string, created time.Time) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, ImageRef: image, CreatedAt: created.UnixNano()}
}

// TestServedStarts counts a container created from an image after the
// agent's pull fetched it, once however often it is listed; not one
// created before the pull, nor one the kubelet restarted, nor one of an
// image the pull found already there (nothing fetched), nor one of an
// image the agent never pulled. Each start counts for every reference the
// agent pulled its image by. Counts leave the window after a day; the
// runtime is listed at most every servedEvery.
func TestServedStarts(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var s served
	f := &fakeContainers{}
	ctx := context.Background()
	if n, _ := s.count(ctx, f, t0); n != 0 || f.calls != 0 {
		t.Fatalf("count %d, %d listings before anything was warmed; want none", n, f.calls)
	}
	s.note([]pullengine.Result{
		{Ref: "r/app@sha256:1", ImageRef: "sha256:warm", Finished: t0}, // brought by the tag's pull
		{Ref: "r/app:1", ImageRef: "sha256:warm", Finished: t0, Fetched: 1000},
		{Ref: "r/there:1", ImageRef: "sha256:there", Finished: t0}, // verified, nothing fetched
	})
	before, saved := testutil.ToFloat64(startsServed), testutil.ToFloat64(bytesSaved)
	restarted := container("restarted", "sha256:warm", t0.Add(time.Minute))
	restarted.Metadata = &runtimeapi.ContainerMetadata{Attempt: 1}
	f.list = []*runtimeapi.Container{
		container("early", "sha256:warm", t0.Add(-time.Minute)),
		container("served", "sha256:warm", t0.Add(time.Minute)),
		restarted,
		container("other", "sha256:there", t0.Add(time.Minute)),
		container("cold", "sha256:never", t0.Add(time.Minute)),
	}
	now := t0.Add(2 * time.Minute)
	n, byRef := s.count(ctx, f, now)
	if n != 1 || !maps.Equal(byRef, map[string]int{"r/app:1": 1, "r/app@sha256:1": 1}) {
		t.Errorf("count %d by reference %v, want the one served start under both references", n, byRef)
	}
	if d := testutil.ToFloat64(startsServed) - before; d != 1 {
		t.Errorf("starts counted %v, want 1", d)
	}
	if d := testutil.ToFloat64(bytesSaved) - saved; d != 1000 {
		t.Errorf("bytes saved %v, want the pull's 1000", d)
	}
	if n, _ := s.count(ctx, f, now.Add(time.Second)); n != 1 || f.calls != 1 {
		t.Errorf("count %d after %d listings; want 1 after one (listed at most every %v)", n, f.calls, servedEvery)
	}
	if n, _ := s.count(ctx, f, now.Add(servedEvery)); n != 1 || f.calls != 2 {
		t.Errorf("count %d after %d listings; want the same start counted once", n, f.calls)
	}
	if n, byRef := s.count(ctx, f, now.Add(servedWindow+time.Minute)); n != 0 || len(byRef) != 0 {
		t.Errorf("count %d (%v) a day later, want 0", n, byRef)
	}
}

// TestServedForgetsOldest keeps at most maxWarmedKept warmed images,
// forgetting the one warmed longest ago.
func TestServedForgetsOldest(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var s served
	for i := range maxWarmedKept + 1 {
		s.note([]pullengine.Result{{Ref: fmt.Sprint("r/i:", i), ImageRef: fmt.Sprint("sha256:", i), Finished: t0.Add(time.Duration(i) * time.Second), Fetched: 1}})
	}
	if len(s.warmed) != maxWarmedKept || s.warmed["sha256:0"] != nil || s.warmed[fmt.Sprint("sha256:", maxWarmedKept)] == nil {
		t.Errorf("%d warmed images kept, the oldest kept: %v; want %d, the oldest forgotten", len(s.warmed), s.warmed["sha256:0"] != nil, maxWarmedKept)
	}
}
