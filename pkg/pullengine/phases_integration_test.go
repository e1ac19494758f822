package pullengine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// TestPhasesSeen pulls a 300 MB image through a link of 40 MB/s on real
// containerd and reads its progress all along: the bytes reported never
// ahead of what crossed the link, the phase going from Downloading to
// Unpacking, the unpacked bytes never ahead of what the image takes once
// unpacked, and a time left while it unpacks. On containerd 1.6 and 2.x.
func TestPhasesSeen(t *testing.T) {
	onEachContainerd(t, testPhasesSeen)
}

func testPhasesSeen(t *testing.T, opts []testbed.ContainerdOption) {
	const payload = 300 * testbed.MB
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "phases"})
	link := faults.StartLinkProxy(t, reg.Host, 40<<20)
	img := testbed.RandomImage(t, testbed.ImageOptions{LayerSize: payload})
	ref := strings.Replace(reg.Push(t, "ai/phases:v1", img).Ref, reg.Host, link.Host, 1)

	n := startNode(t, "node-phases", opts...)
	ctx := context.Background()
	store, snaps := n.views(t)
	e := startEngine(t, n.cri, pullengine.Options{Content: store, Snapshots: snaps,
		ProgressInterval: 100 * time.Millisecond, StallTimeout: pullengine.DefaultStallTimeout})
	if st := e.Enqueue(e.ctx, pullengine.Request{Image: ref}); st.State != pull.StateQueued {
		t.Fatalf("Enqueue(%s) = %+v", ref, st)
	}
	w := watchPhases(t, e, link, ref)
	if r := e.result(t); !r.Succeeded() {
		t.Fatalf("pull: %+v", r)
	}
	if seen := w.seen; len(seen) < 2 || seen[0] != pull.PhaseDownloading || seen[len(seen)-1] != pull.PhaseUnpacking {
		t.Errorf("phases seen %v, want Downloading then Unpacking", seen)
	}
	if !w.unpackingLeft {
		t.Error("no time left was given while the image unpacked")
	}
	// What the image takes unpacked: its one layer's snapshot, committed.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// One layer: its chain ID is its diff ID.
	layers, final, err := snaps.Progress(ctx, []string{cf.RootFS.DiffIDs[0].String()})
	if err != nil || layers != 1 {
		t.Fatalf("the image's snapshots: %d layers, %v", layers, err)
	}
	if final < payload {
		t.Fatalf("the unpacked image takes %d bytes, less than its %d byte file", final, payload)
	}
	if most := w.most; most.Unpacked == 0 || most.Unpacked > final {
		t.Errorf("reported at most %d bytes unpacked; the image takes %d", most.Unpacked, final)
	}
	t.Logf("reported up to %d bytes unpacked (%d of %d layers); the image takes %d", w.most.Unpacked, w.most.LayersUnpacked, w.most.Layers, final)
}

// phasesSeen is what a pull's readings showed: its phases in turn, the
// reading with the most bytes unpacked, and whether a time left was given
// while it unpacked.
type phasesSeen struct {
	seen          []pull.Phase
	most          pull.Progress
	unpackingLeft bool
}

// watchPhases reads ref's progress until its pull ends, failing the test
// at any reading of more bytes in than the link had carried.
func watchPhases(t *testing.T, e *engine, link *faults.SlowProxy, ref string) phasesSeen {
	t.Helper()
	var w phasesSeen
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s, _ := e.Status(ref)
		sent := link.Sent() // read after: the truth can only have grown
		if s.State != pull.StatePulling && s.State != pull.StateQueued {
			break
		}
		if p := s.Progress; p != nil && p.Known {
			w.take(t, *p, sent)
		}
	}
	return w
}

// take notes one reading p, taken when the link had carried sent bytes.
func (w *phasesSeen) take(t *testing.T, p pull.Progress, sent int64) {
	t.Helper()
	if p.Done > sent {
		t.Errorf("reported %d bytes in, the link had carried %d", p.Done, sent)
	}
	if len(w.seen) == 0 || w.seen[len(w.seen)-1] != p.Phase {
		w.seen = append(w.seen, p.Phase)
		t.Logf("phase %s at %d of %d bytes, %d unpacked", p.Phase, p.Done, p.Total, p.Unpacked)
	}
	if left, ok := p.Left(); ok && p.Phase == pull.PhaseUnpacking && left > 0 {
		w.unpackingLeft = true
	}
	if p.Unpacked > w.most.Unpacked {
		w.most = p
	}
}

// TestUnpackStall holds a real containerd's unpack part way through its
// first layer (testbed.WithUnpackHold: its gzip decompressor stops while
// a file exists) with every byte of the image fetched and the snapshot
// service still answering: the pull shows Unpacking, then is cancelled as
// Stalled, in the unpack, once nothing was unpacked for the stall
// timeout. With the hold gone the image pulls. On containerd 1.6 and 2.x.
func TestUnpackStall(t *testing.T) {
	onEachContainerd(t, testUnpackStall)
}

func testUnpackStall(t *testing.T, opts []testbed.ContainerdOption) {
	const stall = 5 * time.Second
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "unpack-stall"})
	ref := reg.Push(t, "ai/stuck:v1", testbed.RandomImage(t, testbed.ImageOptions{LayerSize: 32 * testbed.MB, Layers: 2})).Ref
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "node-stuck", append(opts, testbed.WithUnpackHold(hold))...)
	store, snaps := n.views(t)
	opt := pullengine.Options{Content: store, Snapshots: snaps, ProgressInterval: 100 * time.Millisecond, StallTimeout: stall}
	e := startEngine(t, n.cri, opt)
	if st := e.Enqueue(e.ctx, pullengine.Request{Image: ref}); st.State != pull.StateQueued {
		t.Fatalf("Enqueue(%s) = %+v", ref, st)
	}
	var seen pull.Progress
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s, _ := e.Status(ref)
		if s.State != pull.StatePulling && s.State != pull.StateQueued {
			break
		}
		if p := s.Progress; p != nil && p.Known && p.Phase == pull.PhaseUnpacking {
			seen = *p
		}
	}
	r := e.result(t)
	if r.Succeeded() || r.Class != pull.ClassStalled || !strings.Contains(r.Message, "nothing unpacked for "+stall.String()) {
		t.Fatalf("pull with the unpack held: %+v, want Stalled in the unpack", r)
	}
	// The hold lets the first MiB through: the active snapshot shows it.
	if seen.Phase != pull.PhaseUnpacking || seen.Done != seen.Total || seen.LayersUnpacked != 0 || seen.Unpacked <= 0 {
		t.Fatalf("last reading while held %+v, want Unpacking with every byte in, bytes but no layer unpacked", seen)
	}
	t.Logf("stalled: %s", r.Message)

	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	again := startEngine(t, n.cri, opt)
	if st := again.Enqueue(again.ctx, pullengine.Request{Image: ref}); st.State != pull.StateQueued {
		t.Fatalf("Enqueue(%s) = %+v", ref, st)
	}
	if r := again.result(t); !r.Succeeded() {
		t.Fatalf("pull once the hold is gone: %+v", r)
	}
}
