package criclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A pull's layers are unpacked into snapshots; CRI reports none of it,
// and the image filesystem's level says how much the disk took, not for
// which pull. containerd's snapshots API, served on the CRI socket, lists
// the active snapshots a pull unpacks into, keyed "extract-<unique>
// <chain ID>" by containerd 1.6, 1.7 and 2.x alike, and measures what
// each takes so far (Usage: on overlayfs, a walk of its upper directory).
// Snapshots reads that API; it changes nothing. CRI-O and cri-dockerd
// offer no such view.

// errLayerInFlux says a layer's active snapshot went between the list and
// its measure, and its committed one is not there yet.
var errLayerInFlux = errors.New("a layer's snapshot is being committed")

// ErrNoSnapshotView says the runtime offers no view of what its pulls
// unpack.
var ErrNoSnapshotView = errors.New("the container runtime offers no view of its pulls' unpacking")

// unpackKeyPrefix begins the key of a snapshot a pull unpacks a layer into.
const unpackKeyPrefix = "extract-"

// snapshotterDirPrefix begins the directory of a snapshotter under
// containerd's root, which the CRI plugin reports as the image
// filesystem: its name follows.
const snapshotterDirPrefix = "io.containerd.snapshotter.v1."

// Snapshots reads containerd's snapshots of the CRI plugin's snapshotter.
// It is safe for concurrent use.
type Snapshots struct {
	client      snapshotsapi.SnapshotsClient
	snapshotter string
	timeout     time.Duration
}

// Snapshots returns the runtime's snapshots view when it has one this
// client can read, or an error wrapping ErrNoSnapshotView that says why
// not. The snapshotter is the one whose directory the runtime reports as
// its image filesystem.
func (c *Client) Snapshots(ctx context.Context) (*Snapshots, error) {
	if err := c.containerdOnly(ErrNoSnapshotView); err != nil {
		return nil, err
	}
	info, err := c.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSnapshotView, err)
	}
	name := ""
	for _, fs := range info.GetImageFilesystems() {
		if base := path.Base(fs.GetFsId().GetMountpoint()); strings.HasPrefix(base, snapshotterDirPrefix) {
			name = strings.TrimPrefix(base, snapshotterDirPrefix)
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%w: containerd on %s reports no snapshotter's directory as its image filesystem", ErrNoSnapshotView, c.endpoint)
	}
	s := newSnapshots(c.conn, name, c.timeout)
	if _, err := s.Unpacked(ctx, nil); err != nil {
		return nil, fmt.Errorf("%w: containerd's snapshots API on %s: %w", ErrNoSnapshotView, c.endpoint, err)
	}
	return s, nil
}

func newSnapshots(conn grpc.ClientConnInterface, snapshotter string, timeout time.Duration) *Snapshots {
	return &Snapshots{client: snapshotsapi.NewSnapshotsClient(conn), snapshotter: snapshotter, timeout: timeout}
}

// Snapshotter names the snapshotter read.
func (s *Snapshots) Snapshotter() string { return s.snapshotter }

func (s *Snapshots) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = metadata.AppendToOutgoingContext(ctx, namespaceHeader, criNamespace)
	return context.WithTimeout(ctx, s.timeout)
}

// Unpacked is how many bytes the snapshots being unpacked for the layers
// of chainIDs take so far: a lower bound of what those layers unpack to.
// A snapshot that goes while it is measured counts for nothing.
func (s *Snapshots) Unpacked(ctx context.Context, chainIDs []string) (int64, error) {
	keys, err := s.unpacking(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		if _, chain, _ := strings.Cut(k, " "); !slices.Contains(chainIDs, chain) {
			continue
		}
		size, err := s.usage(ctx, k)
		if err != nil {
			return 0, err
		}
		n += size
	}
	return n, nil
}

// unpacking lists the keys of the active snapshots pulls unpack into.
func (s *Snapshots) unpacking(ctx context.Context) ([]string, error) {
	return s.names(ctx, []string{"kind==active"}, "the active snapshots", func(name string) bool {
		return strings.HasPrefix(name, unpackKeyPrefix)
	})
}

// usage is what snapshot key takes; 0 when it is gone.
func (s *Snapshots) usage(ctx context.Context, key string) (int64, error) {
	size, _, err := s.usageOf(ctx, key)
	return size, err
}

// Progress measures how far the layers of chainIDs are unpacked: how
// many are (their snapshots committed), and the bytes those take plus
// what the active snapshots being unpacked into for the others hold so
// far (a committed snapshot's usage is recorded at commit; an active
// one's is a walk of what it holds).
//
// A layer counts once, by the most any snapshot of its chain takes: two
// pulls of one image may unpack it side by side. And a layer whose active
// snapshot was committed between the list and its measure (a layer a
// second and more on a fast disk) is measured by its committed name:
// counted as gone, it took all its bytes out of the sum, which went down
// while the disk had only grown. When neither is there, containerd is
// still committing it (its snapshotter has, its metadata has not yet:
// seconds, on a busy disk): the measure fails rather than count it as
// nothing, and the caller keeps its reading before.
func (s *Snapshots) Progress(ctx context.Context, chainIDs []string) (layers int, bytes int64, err error) {
	names, err := s.list(ctx, chainIDs)
	if err != nil {
		return 0, 0, err
	}
	took := map[string]int64{}
	done := map[string]bool{}
	for _, name := range names {
		chain, committed := name, true
		if strings.HasPrefix(name, unpackKeyPrefix) {
			_, chain, _ = strings.Cut(name, " ")
			committed = false
		}
		if !slices.Contains(chainIDs, chain) {
			continue
		}
		size, found, err := s.usageOf(ctx, name)
		if err == nil && !found && !committed {
			size, committed, err = s.usageOf(ctx, chain)
			if err == nil && !committed {
				err = fmt.Errorf("measuring the unpack of %s: %w", chain, errLayerInFlux)
			}
		}
		if err != nil {
			return 0, 0, err
		}
		took[chain] = max(took[chain], size)
		done[chain] = done[chain] || committed
	}
	for chain, n := range took {
		bytes += n
		if done[chain] {
			layers++
		}
	}
	return layers, bytes, nil
}

// usageOf is what snapshot key takes; found false when it is gone.
func (s *Snapshots) usageOf(ctx context.Context, key string) (size int64, found bool, err error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.client.Usage(ctx, &snapshotsapi.UsageRequest{Snapshotter: s.snapshotter, Key: key})
	if status.Code(err) == codes.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("measuring snapshot %q: %w", key, err)
	}
	return resp.GetSize(), true, nil
}

// list lists the names of the active snapshots and of the committed ones
// named by chainIDs (containerd matches any of a list's filters).
func (s *Snapshots) list(ctx context.Context, chainIDs []string) ([]string, error) {
	filters := []string{"kind==active"}
	for _, c := range chainIDs {
		filters = append(filters, "name=="+strconv.Quote(c))
	}
	return s.names(ctx, filters, "the snapshots", nil)
}

// names lists the names of the snapshots matching any of filters that
// keep (nil: all) keeps; what names them in errors.
func (s *Snapshots) names(ctx context.Context, filters []string, what string, keep func(string) bool) ([]string, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	stream, err := s.client.List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: s.snapshotter, Filters: filters})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	var out []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		for _, info := range resp.GetInfo() {
			if keep == nil || keep(info.GetName()) {
				out = append(out, info.GetName())
			}
		}
	}
}
