package pullengine

import (
	"errors"
	"sync"
	"testing"

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
	}{
		{"below default", 0, 80, nil, nil, []string{"/imgfs"}, false},
		{"above default", 0, 81, nil, nil, []string{"/imgfs"}, true},
		{"custom threshold", 50, 60, nil, nil, []string{"/imgfs"}, true},
		{"disabled at 100", 100, 99, nil, nil, []string{"/imgfs"}, false},
		{"mountpoint unreachable", 0, 99, errors.New("no such file"), nil, []string{"/imgfs"}, false},
		{"ImageFsInfo fails", 0, 99, nil, errors.New("unimplemented"), nil, false},
		{"no filesystems reported", 0, 99, nil, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk := &fakeDisk{}
			disk.set(tt.percent, tt.statErr)
			h := newHarness(t, Options{DiskThresholdPercent: tt.threshold, statfs: disk.statfs})
			h.svc.fsInfo, h.svc.fsErr = imageFs(tt.mounts...), tt.fsErr
			st := h.enqueue("a", 0)
			if blocked := st.State == StateFailed; blocked != tt.blocked {
				t.Fatalf("status %+v, blocked want %v", st, tt.blocked)
			}
			if tt.blocked && (st.Last.Class != ClassDiskPressure || !st.RetryAt.Equal(h.clock.Now().Add(DefaultDiskCheckInterval))) {
				t.Fatalf("blocked status %+v", st)
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
	if st := h.enqueue("a", 0); st.State != StateFailed {
		t.Fatalf("full disk: %s", st.State)
	}
	disk.set(10, nil)
	if st := h.enqueue("a", 0); st.State != StateFailed {
		t.Fatalf("within the check interval the reading is reused: %s", st.State)
	}
	h.clock.Step(DefaultDiskCheckInterval)
	if st := h.enqueue("a", 0); st.State != StateQueued {
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
	if res.Class != ClassDiskPressure || !res.RetryAt.IsZero() || res.Attempts != 0 {
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
