package pullengine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Disk guard defaults. 80 % stays below the kubelet's image garbage
// collection start (85 %): warming must not push the node into GC, which
// would delete images, possibly the ones just warmed.
const (
	DefaultDiskThresholdPercent = 80
	DefaultDiskCheckInterval    = 10 * time.Second
)

// ImageFsReader reports the image filesystem's size and use from outside
// the agent's own view of it.
type ImageFsReader interface {
	// ReadImageFs returns the image filesystem's figures, in bytes.
	ReadImageFs(ctx context.Context) (FsStats, error)
}

// FsStats is a filesystem's size, free space and what images use of it.
type FsStats struct {
	CapacityBytes, AvailableBytes, UsedBytes uint64
}

// statfsFunc returns a filesystem's capacity and space available to
// unprivileged users, in bytes.
type statfsFunc func(path string) (capacity, available uint64, err error)

func statfs(path string) (uint64, uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// diskGuard stops new pulls while the image filesystem is above the
// threshold. The runtime tells where images live (ImageFsInfo) but not how
// big that filesystem is, so size and free space come from fs (the
// kubelet's figures) or, failing that, from statfs on the mountpoint, which
// the agent sees only as a process on the node or through a mount. When
// both fail, the level is unknown and the guard blocks if holdUnknown
// says it must (the agent's default). Readings are cached for interval.
type diskGuard struct {
	svc       ImageService
	threshold int // percent; >= 100 disables the guard
	interval  time.Duration
	clock     clock.PassiveClock
	statfs    statfsFunc
	fs        ImageFsReader // nil: statfs only
	// holdUnknown holds pulls while the level cannot be read.
	holdUnknown bool

	mu      sync.Mutex
	readAt  time.Time
	reading DiskUsage
}

// check reports the current level and whether pulls must wait.
func (g *diskGuard) check(ctx context.Context) (DiskUsage, bool) {
	if g.threshold >= 100 {
		return DiskUsage{}, false
	}
	u := g.usage(ctx)
	return u, u.Pressure
}

// usage returns the cached reading, refreshing it when older than interval.
func (g *diskGuard) usage(ctx context.Context) DiskUsage {
	u, _ := g.usageWithin(ctx, g.interval)
	return u
}

// kubeletReadAge is the oldest reading of the kubelet's figures the
// unpack check takes: each is a /stats/summary request, which makes the
// kubelet gather every pod's stats, so it is asked at most once a second
// however fast the check polls. statfs, a system call, is read at the
// check's own pace.
const kubeletReadAge = time.Second

// fastAge is the oldest reading the unpack check takes from this guard.
func (g *diskGuard) fastAge() time.Duration {
	if g.fs != nil {
		return kubeletReadAge
	}
	return unpackReadAge
}

// usageWithin returns the cached reading and when it was read, refreshing
// it when older than maxAge: the unpack check (unpack.go) wants a fresh
// one while pulls write, and its readings serve admissions too.
func (g *diskGuard) usageWithin(ctx context.Context, maxAge time.Duration) (DiskUsage, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	if !g.readAt.IsZero() && now.Sub(g.readAt) < maxAge {
		return g.reading, g.readAt
	}
	g.reading, g.readAt = g.read(ctx), now
	g.reading.ThresholdPercent = g.threshold
	g.reading.Pressure = g.threshold < 100 && (g.reading.Known && g.reading.Percent > g.threshold || !g.reading.Known && g.holdUnknown)
	return g.reading, g.readAt
}

// read asks fs for the image filesystem's level, or else the runtime for
// its image filesystems and statfs for their size, keeping the fullest.
func (g *diskGuard) read(ctx context.Context) DiskUsage {
	logger := logr.FromContextOrDiscard(ctx)
	info, err := g.svc.ImageFsInfo(ctx)
	if u, ok := g.readFs(ctx, info); ok {
		return u
	}
	if err != nil {
		logger.V(1).Info("Image filesystem level unknown", "error", err.Error(), "holdingPulls", g.holdUnknown)
		return DiskUsage{}
	}
	var fullest DiskUsage
	for _, fs := range info.GetImageFilesystems() {
		u := DiskUsage{Mountpoint: fs.GetFsId().GetMountpoint(), ImagesBytes: fs.GetUsedBytes().GetValue()}
		capacity, avail, err := g.statfs(u.Mountpoint)
		if err != nil || capacity == 0 {
			logger.V(1).Info("Image filesystem not reachable; its level is unknown", "mountpoint", u.Mountpoint)
			continue
		}
		u.Known, u.CapacityBytes, u.AvailableBytes = true, capacity, min(avail, capacity)
		u.Percent = 100 - int(u.AvailableBytes*100/capacity)
		if !fullest.Known || u.Percent > fullest.Percent {
			fullest = u
		}
	}
	return fullest
}

// readFs returns fs's reading, with the mountpoint and images' size the
// runtime reports when it answered (info may be nil).
func (g *diskGuard) readFs(ctx context.Context, info *runtimeapi.ImageFsInfoResponse) (DiskUsage, bool) {
	if g.fs == nil {
		return DiskUsage{}, false
	}
	st, err := g.fs.ReadImageFs(ctx)
	if err != nil || st.CapacityBytes == 0 {
		logr.FromContextOrDiscard(ctx).V(1).Info("Image filesystem size not read, measuring its mountpoint", "error", fmt.Sprint(err))
		return DiskUsage{}, false
	}
	u := DiskUsage{Known: true, CapacityBytes: st.CapacityBytes, AvailableBytes: min(st.AvailableBytes, st.CapacityBytes), ImagesBytes: st.UsedBytes}
	if fss := info.GetImageFilesystems(); len(fss) > 0 {
		u.Mountpoint = fss[0].GetFsId().GetMountpoint()
	}
	u.Percent = 100 - int(u.AvailableBytes*100/u.CapacityBytes)
	return u, true
}

// message explains a blocked pull.
func (g *diskGuard) message(u DiskUsage) string {
	if !u.Known {
		return "the image filesystem's level cannot be read, and the disk guard holds new pulls until it can"
	}
	fs := "the image filesystem"
	if u.Mountpoint != "" {
		fs = "image filesystem " + u.Mountpoint
	}
	return fmt.Sprintf("%s is %d%% full, above the %d%% pull threshold; waiting for space", fs, u.Percent, g.threshold)
}

// room is how many bytes the image filesystem can still take before it
// passes the threshold (negative above it); false when the level is
// unknown or the guard is off.
func (g *diskGuard) room(u DiskUsage) (int64, bool) {
	if g.threshold >= 100 || !u.Known || u.CapacityBytes == 0 {
		return 0, false
	}
	allowed := u.CapacityBytes / 100 * uint64(g.threshold)
	return int64(allowed) - int64(u.CapacityBytes-u.AvailableBytes), true
}
