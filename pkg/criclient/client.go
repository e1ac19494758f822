package criclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// DefaultTimeout bounds every call but PullImage, as the kubelet's
	// --runtime-request-timeout does.
	DefaultTimeout = 2 * time.Minute
	// maxMsgSize lets ListImages answer on nodes with thousands of images;
	// gRPC's own default (4 MiB) is the kubelet's reason for the same limit.
	maxMsgSize = 16 << 20
)

// reconnect is how the connection comes back after the runtime went away
// (a containerd restart or upgrade): the kubelet's settings. gRPC's own
// back-off grows to 120 s, so an agent could stay unready for up to two
// minutes after a long runtime outage had ended.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// Config says where and how to reach the runtime.
type Config struct {
	// Endpoint is "unix:///path/to/sock" or "/path/to/sock". Empty means
	// discover one among Sockets.
	Endpoint string
	// Sockets are the discovery candidates; nil means DefaultSockets.
	Sockets []string
	// Timeout bounds each call except PullImage; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Client talks to one CRI runtime over one gRPC connection. It is safe for
// concurrent use.
type Client struct {
	endpoint string
	timeout  time.Duration
	conn     *grpc.ClientConn
	images   runtimeapi.ImageServiceClient
	runtime  runtimeapi.RuntimeServiceClient
	version  *runtimeapi.VersionResponse
}

// New connects to the runtime and checks it answers Version before
// returning, so a wrong socket fails at start rather than at the first pull.
// It logs through ctx's logr logger, if any.
func New(ctx context.Context, cfg Config) (*Client, error) {
	endpoint, err := resolveEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	addr, dialer, err := dialerFor(endpoint)
	if err != nil {
		return nil, err
	}
	// The passthrough resolver hands the raw socket path to the dialer;
	// grpc.NewClient would otherwise resolve it as a DNS name.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(dialer),
		grpc.WithConnectParams(reconnect),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("connecting to CRI endpoint %q: %w", endpoint, err)
	}
	c := newClient(endpoint, conn, cfg.Timeout)
	if c.version, err = c.Version(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("checking CRI endpoint %q: %w", endpoint, err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Connected to CRI runtime", "endpoint", endpoint,
		"runtime", c.version.GetRuntimeName(), "version", c.version.GetRuntimeVersion())
	return c, nil
}

func resolveEndpoint(cfg Config) (string, error) {
	if cfg.Endpoint != "" {
		return cfg.Endpoint, nil
	}
	sockets := cfg.Sockets
	if sockets == nil {
		sockets = DefaultSockets
	}
	return Discover(sockets)
}

func newClient(endpoint string, conn *grpc.ClientConn, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{
		endpoint: endpoint,
		timeout:  timeout,
		conn:     conn,
		images:   runtimeapi.NewImageServiceClient(conn),
		runtime:  runtimeapi.NewRuntimeServiceClient(conn),
	}
}

// Endpoint is the endpoint the client is connected to.
func (c *Client) Endpoint() string { return c.endpoint }

// RuntimeVersion is the Version answer New received.
func (c *Client) RuntimeVersion() *runtimeapi.VersionResponse { return c.version }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Version asks the runtime for its name and version.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{})
	return resp, wrap("Version", err)
}

// ListImages lists every image the runtime holds.
func (c *Client) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, wrap("ListImages", err)
	}
	return resp.GetImages(), nil
}

// ListContainers lists the runtime's containers (the kubelet's, and any
// other client's).
func (c *Client) ListContainers(ctx context.Context) ([]*runtimeapi.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, wrap("ListContainers", err)
	}
	return resp.GetContainers(), nil
}

// ImageStatus returns the image ref names, or nil without error when the
// runtime does not hold it.
func (c *Client) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	if err := checkRef("ImageStatus", ref); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return nil, wrap("ImageStatus", err)
	}
	return resp.GetImage(), nil
}

// PullImage pulls ref with auth (nil for anonymous) and returns the image
// reference the runtime reports (its ID). No timeout applies: only ctx ends
// it, since a deadline would abort a long download that is progressing.
func (c *Client) PullImage(ctx context.Context, ref string, auth *runtimeapi.AuthConfig) (string, error) {
	if err := checkRef("PullImage", ref); err != nil {
		return "", err
	}
	ctx, end := c.inOwnLease(ctx)
	defer end()
	resp, err := c.images.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: ref},
		Auth:  auth,
	})
	if err != nil {
		return "", wrap("PullImage", err)
	}
	if resp.GetImageRef() == "" {
		return "", wrap("PullImage", status.Error(codes.Internal, "runtime reported success without an image reference"))
	}
	return resp.GetImageRef(), nil
}

// RemoveImage removes the image ref names, with all its tags and digests.
// Removing an absent image succeeds.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	if err := checkRef("RemoveImage", ref); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	return wrap("RemoveImage", err)
}

// ImageFsInfo reports the filesystems that hold images.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	return resp, wrap("ImageFsInfo", err)
}

// checkRef refuses empty (or blank) references: runtimes match "" as an ID
// prefix, so it can name whichever image happens to be alone on the node.
func checkRef(op, ref string) error {
	if strings.TrimSpace(ref) == "" {
		return wrap(op, errEmptyReference)
	}
	return nil
}
