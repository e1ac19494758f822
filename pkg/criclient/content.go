package criclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"

	"github.com/warmer-dev/warmer/pkg/criclient/content"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CRI reports a pull only when it ends. containerd writes every blob of a
// pull into its content store, whose API, served on the CRI socket, lists
// the blobs being written with their bytes so far, for any pull (warmer's
// or the kubelet's). ContentStore reads that API; it writes only the lease
// that keeps a paused pull's partial blobs (keep.go).
//
// Two labels containerd sets on a pull's blobs find an image's manifest
// before its layers arrive: the distribution source label, which names
// the registry host in its key and the repositories in its value, and the
// garbage collection label pointing at the image config, which only
// manifests carry. containerd sets both on a manifest when it has fetched
// it, before it fetches the layers the manifest names.
const (
	// DistributionSourcePrefix begins the key of the label naming where a
	// blob was fetched from: the key ends with the registry's host name
	// (without its port: a label key holds no colon), the value lists
	// repositories, comma-separated.
	DistributionSourcePrefix = "containerd.io/distribution.source."
	// configRefLabel is on manifests only: it names their config blob.
	configRefLabel = "containerd.io/gc.ref.content.config"
)

// ErrNoContentView says the runtime offers no view of the blobs its pulls
// write.
var ErrNoContentView = errors.New("the container runtime offers no view of its pulls' bytes")

// Ingest and Blob are what the store shows (package content, which the
// pull engine reads without this client).
type (
	Ingest = content.Ingest
	Blob   = content.Blob
)

// ContentStore reads containerd's content store in the CRI plugin's
// namespace. It is safe for concurrent use.
type ContentStore struct {
	content contentapi.ContentClient
	leases  leasesapi.LeasesClient // only for Keep and the pulls' leases (keep.go, pulls.go)
	timeout time.Duration
}

// ContentStore returns the runtime's content store when it has one this
// client can read, or an error wrapping ErrNoContentView that says why
// not: the runtime is not containerd (CRI-O keeps its blobs out of any
// API), or its content API does not answer.
func (c *Client) ContentStore(ctx context.Context) (*ContentStore, error) {
	if err := c.containerdOnly(ErrNoContentView); err != nil {
		return nil, err
	}
	s := newContentStore(c.conn, c.timeout)
	if _, err := s.Ingests(ctx); err != nil {
		return nil, fmt.Errorf("%w: containerd's content API on %s: %w", ErrNoContentView, c.endpoint, err)
	}
	return s, nil
}

func newContentStore(conn grpc.ClientConnInterface, timeout time.Duration) *ContentStore {
	return &ContentStore{content: contentapi.NewContentClient(conn), leases: leasesapi.NewLeasesClient(conn), timeout: timeout}
}

func (s *ContentStore) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = metadata.AppendToOutgoingContext(ctx, namespaceHeader, criNamespace)
	return context.WithTimeout(ctx, s.timeout)
}

// Ingests lists the blobs being written.
func (s *ContentStore) Ingests(ctx context.Context) ([]Ingest, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.content.ListStatuses(ctx, &contentapi.ListStatusesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the content store's ingests: %w", err)
	}
	out := make([]Ingest, 0, len(resp.GetStatuses()))
	for _, st := range resp.GetStatuses() {
		out = append(out, Ingest{Ref: st.GetRef(), Digest: ingestDigest(st), Offset: st.GetOffset(), Total: st.GetTotal(),
			UpdatedAt: asTime(st.GetUpdatedAt())})
	}
	return out, nil
}

// ingestDigest is the digest an ingest writes: the one it expects, or
// else the one its reference ends with (containerd's pulls name an ingest
// "layer-sha256:...", "config-sha256:..." and so on).
func ingestDigest(st *contentapi.Status) string {
	if d := st.GetExpected(); d != "" {
		return d
	}
	if i := strings.Index(st.GetRef(), "sha256:"); i >= 0 {
		return st.GetRef()[i:]
	}
	return ""
}

// SourceLabel is the key of the distribution source label of blobs
// fetched from host ("registry.example:5000" or without a port).
func SourceLabel(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return DistributionSourcePrefix + host
}

// Manifests lists the image manifests fetched from repository repo of
// host: blobs whose distribution source label (SourceLabel) lists repo,
// and that reference a config. containerd 1.6 lists blobs without their
// times; those are then read one by one (a repository has few manifests
// on a node).
func (s *ContentStore) Manifests(ctx context.Context, host, repo string) ([]Blob, error) {
	all, err := s.manifestsFrom(ctx, host)
	if err != nil {
		return nil, err
	}
	var out []Blob
	for _, b := range all {
		if !slices.Contains(strings.Split(b.Labels[SourceLabel(host)], ","), repo) {
			continue
		}
		if b.UpdatedAt.IsZero() {
			full, ok, err := s.Blob(ctx, b.Digest)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // removed since
			}
			b = full
		}
		out = append(out, b)
	}
	return out, nil
}

// manifestsFrom lists the manifests fetched from host.
func (s *ContentStore) manifestsFrom(ctx context.Context, host string) ([]Blob, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	filter := "labels." + strconv.Quote(SourceLabel(host)) + ",labels." + strconv.Quote(configRefLabel)
	stream, err := s.content.List(ctx, &contentapi.ListContentRequest{Filters: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("listing the manifests from %s: %w", host, err)
	}
	var out []Blob
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the manifests from %s: %w", host, err)
		}
		for _, info := range resp.GetInfo() {
			out = append(out, blobOf(info))
		}
	}
}

// Blob describes one blob the store holds in full; false when it holds
// none of that digest (a blob still being written is not held).
func (s *ContentStore) Blob(ctx context.Context, digest string) (Blob, bool, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.content.Info(ctx, &contentapi.InfoRequest{Digest: digest})
	if status.Code(err) == codes.NotFound {
		return Blob{}, false, nil
	}
	if err != nil {
		return Blob{}, false, fmt.Errorf("reading blob %s's info: %w", digest, err)
	}
	return blobOf(resp.GetInfo()), true, nil
}

// Read returns the bytes of a blob of at most limit bytes; a larger one is
// refused (manifests are small; anything else is not read here).
func (s *ContentStore) Read(ctx context.Context, digest string, limit int64) ([]byte, error) {
	b, ok, err := s.Blob(ctx, digest)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", digest, status.Error(codes.NotFound, "not in the content store"))
	}
	if b.Size > limit {
		return nil, fmt.Errorf("blob %s has %d bytes, more than the %d read here", digest, b.Size, limit)
	}
	ctx, cancel := s.call(ctx)
	defer cancel()
	stream, err := s.content.Read(ctx, &contentapi.ReadContentRequest{Digest: digest})
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", digest, err)
	}
	out := make([]byte, 0, b.Size)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading blob %s: %w", digest, err)
		}
		if int64(len(out)+len(resp.GetData())) > limit {
			return nil, fmt.Errorf("blob %s grew past the %d bytes read here", digest, limit)
		}
		out = append(out, resp.GetData()...)
	}
}

func blobOf(info *contentapi.Info) Blob {
	return Blob{Digest: info.GetDigest(), Size: info.GetSize(), CreatedAt: asTime(info.GetCreatedAt()),
		UpdatedAt: asTime(info.GetUpdatedAt()), Labels: info.GetLabels()}
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
