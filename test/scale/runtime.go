package scale

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// FakeRuntime is an in-memory CRI image service. It stands in for
// containerd in the fleet simulation only: a thousand real containerds
// cannot run on one machine, and the fleet benchmark measures the API
// traffic and the controller, not pulls (test/perf's time-to-warm
// benchmark measures those on a real containerd). A pull takes
// PullLatency, then the image is listed; ImageFsInfo reports "/".
type FakeRuntime struct {
	// PullLatency is how long every pull takes.
	PullLatency time.Duration
	// ImageSize is the size every pulled image reports.
	ImageSize uint64
	// Gauge, if set, counts this runtime's pulls in flight with the
	// rest of the fleet's.
	Gauge *PullGauge
	// Missing, if set, says which references the registry does not
	// have: their pulls take PullLatency, then fail NotFound.
	Missing func(ref string) bool

	mu        sync.Mutex
	images    map[string]*runtimeapi.Image // by reference
	pulls     int                          // pulls completed
	firstPull time.Time                    // when the first one began
	lastPull  time.Time                    // when the last one completed
}

var _ pullengine.ImageService = &FakeRuntime{}

// NewFakeRuntime returns an empty runtime whose pulls take latency.
func NewFakeRuntime(latency time.Duration, size uint64) *FakeRuntime {
	return &FakeRuntime{PullLatency: latency, ImageSize: size, images: map[string]*runtimeapi.Image{}}
}

// ListImages lists the pulled images.
func (f *FakeRuntime) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*runtimeapi.Image, 0, len(f.images))
	for _, img := range f.images {
		out = append(out, img)
	}
	return out, nil
}

// ImageStatus returns the image pulled as ref, or nil.
func (f *FakeRuntime) ImageStatus(_ context.Context, ref string) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[normalise(ref)], nil
}

// PullImage waits PullLatency (or until ctx ends), then holds the image.
func (f *FakeRuntime) PullImage(ctx context.Context, ref string, _ *runtimeapi.AuthConfig) (string, error) {
	key := normalise(ref)
	f.mu.Lock()
	if f.firstPull.IsZero() {
		f.firstPull = time.Now()
	}
	f.mu.Unlock()
	f.Gauge.begin(key)
	defer f.Gauge.end(key)
	t := time.NewTimer(f.PullLatency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
	}
	if f.Missing != nil && f.Missing(ref) {
		// containerd's words for a tag the registry does not have.
		return "", status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", ref, ref, ref)
	}
	sum := sha256.Sum256([]byte(key))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	img := &runtimeapi.Image{Id: digest, RepoTags: []string{key}, Size: f.ImageSize}
	if r, err := imageref.Parse(key); err == nil {
		img.RepoDigests = []string{r.Name() + "@" + digest}
	}
	f.mu.Lock()
	f.images[key] = img
	f.pulls++
	f.lastPull = time.Now()
	f.mu.Unlock()
	return digest, nil
}

// Pulls says how many pulls have completed and when the last one did.
func (f *FakeRuntime) Pulls() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pulls, f.lastPull
}

// Busy is when the first pull began and how long from then to the last
// one's end: the node's warm, as its runtime saw it.
func (f *FakeRuntime) Busy() (time.Time, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstPull, f.lastPull.Sub(f.firstPull)
}

// ImageFsInfo reports the root filesystem, holding the pulled images.
func (f *FakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	used := uint64(len(f.images)) * f.ImageSize
	f.mu.Unlock()
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: "/"},
		UsedBytes: &runtimeapi.UInt64Value{Value: used},
	}}}, nil
}

// normalise is the reference as containerd's CRI lists it (fully
// qualified); a reference that does not parse is kept as given.
func normalise(ref string) string {
	r, err := imageref.Parse(ref)
	if err != nil {
		return ref
	}
	return r.String()
}
