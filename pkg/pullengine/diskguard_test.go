package pullengine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeDisk is a statfs stand-in whose fill level tests can change.
type fakeDisk struct {
	mu      sync.Mutex
	percent uint64
	err     error
	paths   []string
}

func (d *fakeDisk) statfs(path string) (uint64, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paths = append(d.paths, path)
	return 1000, 1000 - d.percent*10, d.err
}

func (d *fakeDisk) set(percent uint64, err error) {
	d.mu.Lock()
	d.percent, d.err = percent, err
	d.mu.Unlock()
}

func imageFs(mounts ...string) *runtimeapi.ImageFsInfoResponse {
	resp := &runtimeapi.ImageFsInfoResponse{}
	for _, m := range mounts {
		resp.ImageFilesystems = append(resp.ImageFilesystems, &runtimeapi.FilesystemUsage{
			FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: m}, UsedBytes: &runtimeapi.UInt64Value{Value: 7}})
	}
	return resp
}

func TestDiskGuard(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		percent   uint64
		statErr   error
		fsErr     error
		mounts    []string
		blocked   bool
		hold      bool // HoldWhenLevelUnknown
	}{
		{"below default", 0, 80, nil, nil, []string{"/imgfs"}, false, false},
		{"above default", 0, 81, nil, nil, []string{"/imgfs"}, true, false},
		{"custom threshold", 50, 60, nil, nil, []string{"/imgfs"}, true, false},
		{"disabled at 100", 100, 99, nil, nil, []string{"/imgfs"}, false, false},
		{"mountpoint unreachable", 0, 99, errors.New("no such file"), nil, []string{"/imgfs"}, false, false},
		{"ImageFsInfo fails", 0, 99, nil, errors.New("unimplemented"), nil, false, false},
		{"no filesystems reported", 0, 99, nil, nil, nil, false, false},
		{"mountpoint unreachable, told to hold", 0, 99, errors.New("no such file"), nil, []string{"/imgfs"}, true, true},
		{"ImageFsInfo fails, told to hold", 0, 99, nil, errors.New("unimplemented"), nil, true, true},
		{"level known, told to hold when not", 0, 50, nil, nil, []string{"/imgfs"}, false, true},
		{"disabled at 100, told to hold", 100, 99, errors.New("no such file"), nil, []string{"/imgfs"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := &fakeDisk{}
			disk.set(tt.percent, tt.statErr)
			h := newHarness(t, Options{DiskThresholdPercent: tt.threshold, statfs: disk.statfs, HoldWhenLevelUnknown: tt.hold})
			h.svc.fsInfo, h.svc.fsErr = imageFs(tt.mounts...), tt.fsErr
			st := h.enqueue("a", 0)
			if blocked := st.State == pull.StateFailed; blocked != tt.blocked {
				t.Fatalf("status %+v, blocked want %v", st, tt.blocked)
			}
			if tt.blocked && (st.Last.Class != pull.ClassDiskPressure || !st.RetryAt.Equal(h.clock.Now().Add(DefaultDiskCheckInterval))) {
				t.Fatalf("blocked status %+v", st)
			}
			if tt.blocked && tt.hold && !strings.Contains(st.Last.Message, "cannot be read") {
				t.Errorf("held for an unknown level, the message says %q", st.Last.Message)
			}
			if !tt.blocked {
				h.result(t)
			}
		})
	}
}

func TestDiskGuardRereadsAfterInterval(t *testing.T) {
	disk := &fakeDisk{}
	disk.set(95, nil)
	h := newHarness(t, Options{statfs: disk.statfs})
	h.svc.fsInfo = imageFs("/imgfs", "/other")
	if st := h.enqueue("a", 0); st.State != pull.StateFailed {
		t.Fatalf("full disk: %s", st.State)
	}
	disk.set(10, nil)
	if st := h.enqueue("a", 0); st.State != pull.StateFailed {
		t.Fatalf("within the check interval the reading is reused: %s", st.State)
	}
	h.clock.Step(DefaultDiskCheckInterval)
	if st := h.enqueue("a", 0); st.State != pull.StateQueued {
		t.Fatalf("after the interval: %s", st.State)
	}
	h.result(t)
	if u := h.eng.DiskUsage(h.ctx); !u.Known || u.Percent != 10 || u.Mountpoint != "/imgfs" || u.ImagesBytes != 7 {
		t.Fatalf("usage %+v", u)
	}
	if len(h.svc.pulled()) != 1 {
		t.Fatal("blocked requests reached the runtime")
	}
}

func TestDiskGuardStopsQueuedPulls(t *testing.T) {
	disk := &fakeDisk{}
	h := newHarness(t, Options{SerializePulls: true, statfs: disk.statfs})
	h.svc.fsInfo = imageFs("/imgfs")
	release := h.svc.block(key(t, "a"))
	h.enqueue("a", 0)
	h.svc.waitStarted(t, key(t, "a"))
	h.enqueue("b", 0)
	disk.set(90, nil) // the disk fills while b waits
	h.clock.Step(DefaultDiskCheckInterval)
	release()
	h.result(t)
	res := h.result(t)
	if res.Class != pull.ClassDiskPressure || !res.RetryAt.IsZero() || res.Attempts != 0 {
		t.Fatalf("b: %+v, want DiskPressure without back-off or attempt", res)
	}
	if len(h.svc.pulled()) != 1 {
		t.Fatal("b reached the runtime")
	}
}

func TestStatfs(t *testing.T) {
	capacity, avail, err := statfs(t.TempDir())
	if err != nil || capacity == 0 || avail > capacity {
		t.Fatalf("statfs = %d, %d, %v", capacity, avail, err)
	}
	if _, _, err := statfs("/no/such/dir"); err == nil {
		t.Fatal("statfs of a missing path succeeded")
	}
}

// fakeImageFs stands in for the kubelet's figures (pkg/kubeletstats has
// its own tests against a kubelet stand-in).
type fakeImageFs struct {
	st  FsStats
	err error
}

func (f fakeImageFs) ReadImageFs(context.Context) (FsStats, error) { return f.st, f.err }

// TestDiskGuardImageFsReader: the reader's figures win over statfs; when
// it fails the guard measures the mountpoint; the runtime's mountpoint is
// reported either way, and the reader alone is enough when the runtime
// does not say where its images are.
func TestDiskGuardImageFsReader(t *testing.T) {
	full := FsStats{CapacityBytes: 1000, AvailableBytes: 50, UsedBytes: 900}
	tests := []struct {
		name       string
		reader     fakeImageFs
		statfs     uint64 // percent statfs reports
		statErr    error
		fsErr      error
		blocked    bool
		percent    int
		images     uint64
		mountpoint string
	}{
		{"reader says full, statfs empty", fakeImageFs{st: full}, 10, nil, nil, true, 95, 900, "/imgfs"},
		{"reader says empty, statfs full", fakeImageFs{st: FsStats{CapacityBytes: 1000, AvailableBytes: 900}}, 99, nil, nil, false, 10, 0, "/imgfs"},
		{"reader fails, statfs full", fakeImageFs{err: errors.New("403")}, 95, nil, nil, true, 95, 7, "/imgfs"},
		{"reader reports no capacity, statfs full", fakeImageFs{}, 95, nil, nil, true, 95, 7, "/imgfs"},
		{"reader full, runtime silent", fakeImageFs{st: full}, 10, errors.New("unreachable"), errors.New("unimplemented"), true, 95, 900, ""},
		{"both fail", fakeImageFs{err: errors.New("timeout")}, 99, errors.New("unreachable"), nil, false, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := &fakeDisk{}
			disk.set(tt.statfs, tt.statErr)
			h := newHarness(t, Options{statfs: disk.statfs, ImageFs: tt.reader})
			h.svc.fsInfo, h.svc.fsErr = imageFs("/imgfs"), tt.fsErr
			if tt.fsErr != nil {
				h.svc.fsInfo = nil
			}
			if st := h.enqueue("a", 0); (st.State == pull.StateFailed) != tt.blocked {
				t.Fatalf("status %+v, blocked want %v", st, tt.blocked)
			}
			u := h.eng.DiskUsage(h.ctx)
			if u.Percent != tt.percent || u.ImagesBytes != tt.images || u.Mountpoint != tt.mountpoint {
				t.Errorf("usage %+v, want %d%%, %d image bytes, mountpoint %q", u, tt.percent, tt.images, tt.mountpoint)
			}
			if !tt.blocked {
				h.result(t)
			}
		})
	}
}
