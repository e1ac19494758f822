package criclient

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func connect(t *testing.T, f *fakeRuntime, timeout time.Duration) *Client {
	t.Helper()
	sock := startFake(t, f)
	c, err := New(context.Background(), Config{Endpoint: "unix://" + sock, Timeout: timeout})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestNewEndpointForms(t *testing.T) {
	sock := startFake(t, &fakeRuntime{})
	for _, ep := range []string{"unix://" + sock, sock} {
		c, err := New(context.Background(), Config{Endpoint: ep})
		if err != nil {
			t.Fatalf("New(%q): %v", ep, err)
		}
		if got := c.RuntimeVersion().GetRuntimeName(); got != "fake" {
			t.Errorf("runtime name = %q, want fake", got)
		}
		_ = c.Close()
	}
}

func TestNewFailures(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.sock")
	tests := []struct {
		name string
		cfg  Config
		want error
		code codes.Code // when want is nil
	}{
		{"no socket", Config{Endpoint: "unix://" + missing, Timeout: time.Second}, nil, codes.Unavailable},
		{"tcp endpoint", Config{Endpoint: "tcp://127.0.0.1:1"}, ErrInvalidEndpoint, 0},
		{"relative path", Config{Endpoint: "containerd.sock"}, ErrInvalidEndpoint, 0},
		{"nothing discovered", Config{Sockets: []string{missing}}, errNoEndpoint, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(context.Background(), tt.cfg)
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("New = %v, want %v", err, tt.want)
			}
			if tt.want == nil && (err == nil || status.Code(err) != tt.code) {
				t.Fatalf("New = %v, want code %v", err, tt.code)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.sock")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "real.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()

	got, err := Discover([]string{filepath.Join(dir, "absent.sock"), plain, sock})
	if err != nil || got != "unix://"+sock {
		t.Fatalf("Discover = %q, %v; want the socket, skipping a missing path and a regular file", got, err)
	}
	if _, err := Discover(nil); !errors.Is(err, errNoEndpoint) {
		t.Fatalf("Discover(nil) = %v, want errNoEndpoint", err)
	}
}

func TestDiscoveredConnect(t *testing.T) {
	sock := startFake(t, &fakeRuntime{})
	c, err := New(context.Background(), Config{Sockets: []string{filepath.Join(t.TempDir(), "x.sock"), sock}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Endpoint() != "unix://"+sock {
		t.Fatalf("Endpoint = %q", c.Endpoint())
	}
}

func TestEmptyReferenceNeverSent(t *testing.T) {
	f := &fakeRuntime{}
	c := connect(t, f, time.Second)
	ctx := context.Background()
	refused := func(err error) bool {
		return status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "empty image reference")
	}
	for _, ref := range []string{"", "  "} {
		if _, err := c.ImageStatus(ctx, ref); !refused(err) {
			t.Errorf("ImageStatus(%q) = %v", ref, err)
		}
		if _, err := c.PullImage(ctx, ref, nil); !refused(err) {
			t.Errorf("PullImage(%q) = %v", ref, err)
		}
		if err := c.RemoveImage(ctx, ref); !refused(err) {
			t.Errorf("RemoveImage(%q) = %v", ref, err)
		}
	}
	if f.statusCount() != 0 || f.pullCount() != 0 {
		t.Fatalf("empty references reached the runtime: %d statuses, %d pulls", f.statusCount(), f.pullCount())
	}
}

// TestErrorsKeepStatus checks that a failed call keeps the runtime's code
// and message, and names the call.
func TestErrorsKeepStatus(t *testing.T) {
	msg := `failed to pull and unpack image "x": not found`
	for _, code := range []codes.Code{codes.NotFound, codes.Unknown, codes.Unavailable, codes.PermissionDenied, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			c := connect(t, &fakeRuntime{pull: func(context.Context, *runtimeapi.PullImageRequest) (string, error) {
				return "", status.Error(code, msg)
			}}, time.Second)
			_, err := c.PullImage(context.Background(), "x", nil)
			if status.Code(err) != code || !strings.Contains(err.Error(), msg) || !strings.HasPrefix(err.Error(), "PullImage: ") {
				t.Fatalf("err = %v (code %v), want code %v, the runtime's message and the call's name", err, status.Code(err), code)
			}
		})
	}
}

func TestTimeoutOnCallsButNotPull(t *testing.T) {
	hang := func(ctx context.Context) { <-ctx.Done() }
	f := &fakeRuntime{
		list: func(ctx context.Context) ([]*runtimeapi.Image, error) { hang(ctx); return nil, ctx.Err() },
		pull: func(context.Context, *runtimeapi.PullImageRequest) (string, error) {
			time.Sleep(300 * time.Millisecond) // longer than the call timeout
			return "sha256:slow", nil
		},
	}
	c := connect(t, f, 100*time.Millisecond)
	if _, err := c.ListImages(context.Background()); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("ListImages = %v, want DeadlineExceeded", err)
	}
	ref, err := c.PullImage(context.Background(), "x", nil)
	if err != nil || ref != "sha256:slow" {
		t.Fatalf("PullImage = %q, %v; want it to outlive the call timeout", ref, err)
	}
}

func TestPullCanceled(t *testing.T) {
	started := make(chan struct{})
	f := &fakeRuntime{pull: func(ctx context.Context, _ *runtimeapi.PullImageRequest) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	c := connect(t, f, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := c.PullImage(ctx, "x", nil); status.Code(err) != codes.Canceled {
		t.Fatalf("PullImage = %v, want Canceled", err)
	}
}

func TestCallsPassThrough(t *testing.T) {
	img := &runtimeapi.Image{Id: "sha256:1", RepoTags: []string{"docker.io/library/a:1"}, Size: 10}
	f := &fakeRuntime{
		list:   func(context.Context) ([]*runtimeapi.Image, error) { return []*runtimeapi.Image{img}, nil },
		status: func(_ context.Context, ref string) (*runtimeapi.Image, error) { return nil, nil },
		fsInfo: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
			return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
				FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"}}}}, nil
		},
	}
	c := connect(t, f, time.Second)
	ctx := context.Background()
	auth := &runtimeapi.AuthConfig{Username: "u", Password: "p"}

	imgs, err := c.ListImages(ctx)
	if err != nil || len(imgs) != 1 || imgs[0].GetId() != "sha256:1" {
		t.Fatalf("ListImages = %v, %v", imgs, err)
	}
	if got, err := c.ImageStatus(ctx, "absent"); got != nil || err != nil {
		t.Fatalf("ImageStatus(absent) = %v, %v; want nil, nil", got, err)
	}
	if _, err := c.PullImage(ctx, "docker.io/library/a:1", auth); err != nil {
		t.Fatal(err)
	}
	if got := f.pullAt(0).GetAuth(); got.GetUsername() != "u" || got.GetPassword() != "p" || got.GetServerAddress() != "" {
		t.Fatalf("auth not passed through unchanged: server address %q", got.GetServerAddress())
	}
	if err := c.RemoveImage(ctx, "docker.io/library/a:1"); err != nil {
		t.Fatal(err)
	}
	fs, err := c.ImageFsInfo(ctx)
	if err != nil || fs.GetImageFilesystems()[0].GetFsId().GetMountpoint() != "/var/lib/containerd" {
		t.Fatalf("ImageFsInfo = %v, %v", fs, err)
	}
}

func TestPullWithoutImageRef(t *testing.T) {
	c := connect(t, &fakeRuntime{pull: func(context.Context, *runtimeapi.PullImageRequest) (string, error) {
		return "", nil
	}}, time.Second)
	if _, err := c.PullImage(context.Background(), "x", nil); err == nil || !strings.Contains(err.Error(), "without an image reference") {
		t.Fatalf("PullImage = %v, want a failure", err)
	}
}

// TestContentStoreNotContainerd: a runtime other than containerd offers
// no content store, and the error says which runtime it is.
func TestContentStoreNotContainerd(t *testing.T) {
	c := connect(t, &fakeRuntime{}, time.Second)
	_, err := c.ContentStore(context.Background())
	if !errors.Is(err, ErrNoContentView) || !strings.Contains(err.Error(), "runtime fake 1.0 is not containerd") {
		t.Fatalf("ContentStore on a fake runtime: %v, want ErrNoContentView naming it", err)
	}
}
