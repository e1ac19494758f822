package pullengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

func TestOutgrown(t *testing.T) {
	fetching := take{reserve: 1000}
	loose := take{loose: true}
	for _, c := range []struct {
		name        string
		room, step  int64
		takes       []take
		wantCancels []int
	}{
		{"room for all", 5000, 1000, []take{fetching, loose}, nil},
		{"exactly the room", 2000, 1000, []take{fetching, loose}, nil},
		{"the pace would pass it: the loose pull goes", 1999, 1000, []take{fetching, loose}, []int{1}},
		{"above the threshold already", -10, 0, []take{loose, fetching, loose}, []int{0, 2}},
		{"only reserved pulls: none cancelled, the guard holds new ones", 500, 1000, []take{fetching, fetching}, nil},
		{"no pull", 0, 0, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := outgrown(c.room, c.step, c.takes); !slices.Equal(got, c.wantCancels) {
				t.Errorf("outgrown(%d, %d, %+v) = %v, want %v", c.room, c.step, c.takes, got, c.wantCancels)
			}
		})
	}
}

func TestTakeOf(t *testing.T) {
	for _, c := range []struct {
		p    pull.Progress
		want take
	}{
		{pull.Progress{}, take{loose: true}},
		{pull.Progress{Known: true, Total: 1000, Done: 400}, take{reserve: 1200, admitted: 2000}},
		{pull.Progress{Known: true, Total: 1000, Done: 1000}, take{loose: true, admitted: 2000}},
	} {
		if got := takeOf(c.p); got != c.want {
			t.Errorf("takeOf(%+v) = %+v, want %+v", c.p, got, c.want)
		}
	}
}

// TestUnpackBombCancelledThenHeld: a pull whose bytes are all in (1.5 KiB
// of layers) keeps writing as the runtime unpacks; the disk is read at
// the watcher's readings (the kubelet's figures, as here, once a second),
// and the pull is cancelled as DiskPressure once, at the pace the disk
// fills, it would pass the threshold within three readings: before it
// does. The
// image then waits without asking the runtime until the room is more than
// it was seen to unpack to, not twice its compressed bytes. The faults
// faked: a pull held in its unpack (the fake runtime's PullImage blocks)
// and a disk filling at a chosen pace between two readings of a fake
// clock, which no real containerd gives on cue; the real bomb is in
// test/faults/registry.
func TestUnpackBombCancelledThenHeld(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.held[l1Digest] = content.Blob{Digest: l1Digest, Size: 1000, CreatedAt: start}
	store.held[l2Digest] = content.Blob{Digest: l2Digest, Size: 500, CreatedAt: start}
	// 10 % used; the room below 80 % is 70,000 bytes.
	fs := &fakeFs{stats: FsStats{CapacityBytes: 100_000, AvailableBytes: 90_000}}
	h := newHarness(t, Options{Content: store, ImageFs: fs})
	img := "reg.example/bomb:v1"
	h.manifestFound(t, img)
	// The runtime unpacks 5,000 bytes a reading: the step ahead is three
	// readings' worth, 15,000 bytes.
	var res Result
	avail := uint64(90_000)
	for res.Class == "" {
		if avail < 20_000 {
			t.Fatalf("never cancelled; the disk is past the threshold at %d bytes free", avail)
		}
		avail -= 5_000
		fs.set(avail)
		h.clock.Step(kubeletReadAge)
		res = h.pollResult(t)
	}
	// 70,000 used: the next three readings would reach 85,000.
	if avail != 30_000 {
		t.Errorf("cancelled at %d bytes free, want 30,000: the pace's three readings before the threshold (20,000 free)", avail)
	}
	t.Logf("cancelled at %d bytes free: %s", avail, res.Message)
	if res.Class != pull.ClassDiskPressure || !strings.Contains(res.Message, "the image unpacked past the room: to more than 68 KiB from 1.5 KiB compressed") ||
		!strings.Contains(res.Message, "below the 80% pull threshold") {
		t.Fatalf("result %+v, want DiskPressure saying it unpacked past the room, with the sizes", res)
	}
	if want := h.clock.Now().Add(DefaultDiskCheckInterval); !res.RetryAt.Equal(want) {
		t.Errorf("RetryAt %v, want the guard's next reading %v (no back-off)", res.RetryAt, want)
	}

	// The unpack's snapshot is gone: the room is back, as much as when it
	// started, and not enough.
	fs.set(90_000)
	reads := fs.reads()
	h.clock.Step(DefaultDiskCheckInterval)
	h.enqueue(img, 0)
	if res := h.result(t); res.Class != pull.ClassDiskPressure || res.Attempts != 0 || len(h.svc.pulled()) != 1 {
		t.Fatalf("with the room it had: %+v after %d pulls; want held before the runtime is called", res, len(h.svc.pulled()))
	}
	// No pull runs: the disk is read for admissions only.
	for range 5 {
		h.clock.Step(time.Second)
	}
	if n := fs.reads() - reads; n > 1 {
		t.Errorf("%d disk readings with no pull running and one admission, want 1", n)
	}
	fs.set(95_000)
	h.clock.Step(DefaultDiskCheckInterval)
	h.enqueue(img, 0)
	h.svc.waitStarted(t, key(t, img))
}

// TestUnpackWithinReservation: a pull still fetching is not cancelled
// while the disk fills within what it reserves.
func TestUnpackWithinReservation(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	content := newFakeContent(start)
	// 1,500 bytes to fetch: 3,000 reserved; 3,500 of room.
	fs := &fakeFs{stats: FsStats{CapacityBytes: 10_000, AvailableBytes: 5_500}}
	h := newHarness(t, Options{Content: content, ImageFs: fs})
	img := "reg.example/app:v1"
	h.manifestFound(t, img)
	h.goesOn(t, fs, 5_400, 5_300, 5_200)
}

// pollResult waits for the watcher's reading after a step of the clock,
// and returns the result it caused, if any.
func (h *harness) pollResult(t *testing.T) Result {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.clock.Waiters() < 2 {
		select {
		case r := <-h.results:
			return r
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher never read")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-h.results:
		return r
	case <-time.After(20 * time.Millisecond):
		return Result{}
	}
}

func TestCulprits(t *testing.T) {
	grownPast := take{loose: true, admitted: 100, grown: 5000, started: true}
	grownWithin := take{loose: true, admitted: 100, grown: 80, started: true}
	measuredPast := take{loose: true, admitted: 100, grown: 5000, started: true, unpacked: 4000, measured: true}
	measuredWithin := take{loose: true, admitted: 100, grown: 5000, started: true, unpacked: 50, measured: true}
	unknown := take{loose: true}
	for _, c := range []struct {
		name    string
		takes   []take
		cancels []int
		want    []int
	}{
		{"the disk grew past its admission, nothing measured", []take{grownPast}, []int{0}, []int{0}},
		{"the disk grew less than its admission: someone else's", []take{grownWithin}, []int{0}, nil},
		{"its snapshots past its admission", []take{measuredPast, measuredWithin}, []int{0, 1}, []int{0}},
		{"its snapshots within: someone else's", []take{measuredWithin}, []int{0}, nil},
		{"nothing known", []take{unknown, grownPast}, []int{0, 1}, []int{0, 1}},
		{"only among those to cancel", []take{measuredPast, grownPast}, []int{1}, []int{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := culprits(c.takes, c.cancels); !slices.Equal(got, c.want) {
				t.Errorf("culprits = %v, want %v", got, c.want)
			}
		})
	}
}

func TestChainIDs(t *testing.T) {
	got, err := chainIDs([]byte(`{"rootfs":{"type":"layers","diff_ids":["sha256:d1","sha256:d2"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	second := sha256.Sum256([]byte("sha256:d1 sha256:d2"))
	if want := []string{"sha256:d1", "sha256:" + hex.EncodeToString(second[:])}; !slices.Equal(got, want) {
		t.Errorf("chainIDs = %v, want %v", got, want)
	}
	for _, bad := range []string{`{`, `{"rootfs":{}}`} {
		if _, err := chainIDs([]byte(bad)); err == nil {
			t.Errorf("chainIDs(%s) took it", bad)
		}
	}
}

// fakeSnapshots is a snapshots view whose unpacks the test sizes: two
// pulls unpacking at the same instant of a fake clock, one past its
// admission, are not to be had from a real containerd on cue (the real
// view is read in pkg/criclient's TestSnapshotsDuringUnpack).
type fakeSnapshots struct {
	mu    sync.Mutex
	sizes map[string]int64 // by chain ID
}

func (f *fakeSnapshots) Unpacked(_ context.Context, chains []string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, c := range chains {
		n += f.sizes[c]
	}
	return n, nil
}

// TestUnpackTwoAtOnce: two pulls unpack as the disk runs out of room; the
// snapshots show which one unpacked past what it was admitted for, and
// only that one is cancelled.
func TestUnpackTwoAtOnce(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.raw[cfgDigest] = `{"rootfs":{"diff_ids":["sha256:d1","sha256:d2"]}}`
	store.held[l1Digest] = content.Blob{Digest: l1Digest, Size: 1000, CreatedAt: start}
	store.held[l2Digest] = content.Blob{Digest: l2Digest, Size: 500, CreatedAt: start}
	// The other image: its own manifest, config and one 2,000-byte layer.
	store.byRepo = map[string][]content.Blob{"other": {{Digest: "sha256:m2", UpdatedAt: start}}}
	store.raw["sha256:m2"] = `{"config":{"digest":"sha256:c2","size":10},"layers":[{"digest":"sha256:a3","size":2000}]}`
	store.raw["sha256:c2"] = `{"rootfs":{"diff_ids":["sha256:d3"]}}`
	store.held["sha256:c2"] = content.Blob{Digest: "sha256:c2", Size: 10, CreatedAt: start}
	store.held["sha256:a3"] = content.Blob{Digest: "sha256:a3", Size: 2000, CreatedAt: start}
	// The bomb's first layer took 60,000 bytes; the other's, 1,000 of
	// the 4,020 it was admitted for.
	snaps := &fakeSnapshots{sizes: map[string]int64{"sha256:d1": 60_000, "sha256:d3": 1_000}}
	fs := &fakeFs{stats: FsStats{CapacityBytes: 100_000, AvailableBytes: 90_000}}
	h := newHarness(t, Options{Content: store, Snapshots: snaps, ImageFs: fs, MaxParallelPulls: 2})
	bomb, other := "reg.example/bomb:v1", "reg.example/other:v1"
	h.pulling(t, bomb)
	h.pulling(t, other)
	h.waitTimers(t, 3) // two pulls' timeouts and the watcher's
	h.clock.Step(time.Second)
	h.waitTimers(t, 3)
	fs.set(25_000) // 75,000 used: 5,000 of room, and filling fast
	h.clock.Step(kubeletReadAge)
	res := h.result(t)
	if res.Ref != key(t, bomb) || res.Class != pull.ClassDiskPressure || !strings.Contains(res.Message, "unpacked past the room: to more than") {
		t.Fatalf("result %+v, want the bomb cancelled for unpacking past the room", res)
	}
	h.noResult(t)
	if s, _ := h.eng.Status(other); s.State != pull.StatePulling {
		t.Errorf("the other pull: %+v, want still pulling", s)
	}
}

// TestDiskStep: the growth expected before a cancel takes effect is three
// readings' worth at the last pace, the readings as far apart as the last
// two were when that was longer.
func TestDiskStep(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var d disk
	if got := d.step(1000, t0, unpackPoll); got != 0 {
		t.Errorf("first reading: step %d, want 0 (no pace yet)", got)
	}
	if got := d.step(2000, t0.Add(unpackPoll), unpackPoll); got != 3000 {
		t.Errorf("1,000 bytes in a poll: step %d, want 3,000", got)
	}
	// Late by a second: 10,000 bytes a second, for three seconds.
	if got := d.step(12_000, t0.Add(unpackPoll+time.Second), unpackPoll); got != 30_000 {
		t.Errorf("late reading: step %d, want 30,000", got)
	}
	if got := d.step(11_000, t0.Add(2*unpackPoll+time.Second), unpackPoll); got != 0 {
		t.Errorf("shrinking: step %d, want 0", got)
	}
	d.step(21_000, t0.Add(3*unpackPoll+time.Second), unpackPoll)
	if got := d.step(21_000, t0.Add(3*unpackPoll+time.Second), unpackPoll); got != 30_000 {
		t.Errorf("the same reading again: step %d, want the last one, 30,000", got)
	}
}

// TestUnpackOthersFillTheDisk: a pull unpacks as the disk runs out of
// room, but its snapshots show it within what it was admitted for:
// someone else filled the disk, and the pull goes on.
func TestUnpackOthersFillTheDisk(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.raw[cfgDigest] = `{"rootfs":{"diff_ids":["sha256:d1","sha256:d2"]}}`
	store.held[l1Digest] = content.Blob{Digest: l1Digest, Size: 1000, CreatedAt: start}
	store.held[l2Digest] = content.Blob{Digest: l2Digest, Size: 500, CreatedAt: start}
	snaps := &fakeSnapshots{sizes: map[string]int64{"sha256:d1": 1000}} // of the 3,020 admitted
	fs := &fakeFs{stats: FsStats{CapacityBytes: 100_000, AvailableBytes: 90_000}}
	h := newHarness(t, Options{Content: store, Snapshots: snaps, ImageFs: fs})
	img := "reg.example/app:v1"
	h.manifestFound(t, img)
	h.goesOn(t, fs, 60_000, 25_000, 21_000)
}

// TestUnpackReadsTheKubeletOnceASecond: while a pull unpacks, the watcher
// polls every unpackPoll, but the kubelet's figures (a /stats/summary
// request each) are read at most once a second.
func TestUnpackReadsTheKubeletOnceASecond(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	store := newFakeContent(start)
	store.held[l1Digest] = content.Blob{Digest: l1Digest, Size: 1000, CreatedAt: start}
	store.held[l2Digest] = content.Blob{Digest: l2Digest, Size: 500, CreatedAt: start}
	fs := &fakeFs{stats: FsStats{CapacityBytes: 100_000, AvailableBytes: 90_000}}
	h := newHarness(t, Options{Content: store, ImageFs: fs})
	h.manifestFound(t, "reg.example/big:v1") // every byte held: it unpacks
	reads := fs.reads()
	for range 30 {
		h.clock.Step(unpackPoll)
		h.waitTimers(t, 2)
	}
	if n := fs.reads() - reads; n < 2 || n > 4 {
		t.Errorf("%d readings of the kubelet's figures in 3 s of unpacking, want about 3 (one a second)", n)
	}
}

// manifestFound starts a pull of img and lets a second pass, in which the
// watcher finds its manifest and the bytes the fake store holds.
func (h *harness) manifestFound(t *testing.T, img string) {
	t.Helper()
	h.pulling(t, img)
	h.waitTimers(t, 2)
	h.clock.Step(time.Second)
	h.waitTimers(t, 2)
}

// goesOn sets the disk's free bytes to each of avails in turn, a reading
// apart, and fails if the running pull ends.
func (h *harness) goesOn(t *testing.T, fs *fakeFs, avails ...uint64) {
	t.Helper()
	for _, avail := range avails {
		fs.set(avail)
		h.clock.Step(kubeletReadAge)
		if res := h.pollResult(t); res.Class != "" {
			t.Fatalf("at %d bytes free: %+v, want the pull to go on", avail, res)
		}
	}
}
