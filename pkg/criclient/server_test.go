package criclient

import (
	"context"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/test/testbed"
)

// fakeRuntime is a CRI server on a unix socket in a temp dir. It is a fake
// for faults a real runtime cannot produce on demand (a hung call, a chosen
// error code); behaviour on real containerd is covered by the integration
// tests. Unset hooks answer with empty success.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	mu       sync.Mutex
	pulls    []*runtimeapi.PullImageRequest
	statuses []string

	list   func(context.Context) ([]*runtimeapi.Image, error)
	status func(context.Context, string) (*runtimeapi.Image, error)
	pull   func(context.Context, *runtimeapi.PullImageRequest) (string, error)
	fsInfo func(context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// startFake serves f on a fresh socket and returns the socket path.
func startFake(t *testing.T, f *fakeRuntime) string {
	t.Helper()
	return testbed.ServeFakeCRI(t, f)
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) ListImages(ctx context.Context, _ *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if f.list == nil {
		return &runtimeapi.ListImagesResponse{}, nil
	}
	imgs, err := f.list(ctx)
	return &runtimeapi.ListImagesResponse{Images: imgs}, err
}

func (f *fakeRuntime) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	f.statuses = append(f.statuses, req.GetImage().GetImage())
	f.mu.Unlock()
	if f.status == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	img, err := f.status(ctx, req.GetImage().GetImage())
	return &runtimeapi.ImageStatusResponse{Image: img}, err
}

func (f *fakeRuntime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, req)
	f.mu.Unlock()
	if f.pull == nil {
		return &runtimeapi.PullImageResponse{ImageRef: "sha256:abc"}, nil
	}
	ref, err := f.pull(ctx, req)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func (f *fakeRuntime) RemoveImage(context.Context, *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeRuntime) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.fsInfo == nil {
		return &runtimeapi.ImageFsInfoResponse{}, nil
	}
	return f.fsInfo(ctx)
}

func (f *fakeRuntime) pullCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pulls)
}

func (f *fakeRuntime) pullAt(i int) *runtimeapi.PullImageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pulls[i]
}

func (f *fakeRuntime) statusCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.statuses)
}
