package criclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// fakeSnapshots answers List with names and Usage from sizes (NotFound
// for a name it lacks): a fake for a race real containerd shows only
// now and then, a layer committed between the list and its measure.
type fakeSnapshots struct {
	snapshotsapi.UnimplementedSnapshotsServer
	names []string
	sizes map[string]int64
}

func (f *fakeSnapshots) List(_ *snapshotsapi.ListSnapshotsRequest, srv snapshotsapi.Snapshots_ListServer) error {
	resp := &snapshotsapi.ListSnapshotsResponse{}
	for _, n := range f.names {
		resp.Info = append(resp.Info, &snapshotsapi.Info{Name: n})
	}
	return srv.Send(resp)
}

func (f *fakeSnapshots) Usage(_ context.Context, req *snapshotsapi.UsageRequest) (*snapshotsapi.UsageResponse, error) {
	n, ok := f.sizes[req.GetKey()]
	if !ok {
		return nil, status.Error(codes.NotFound, "snapshot does not exist")
	}
	return &snapshotsapi.UsageResponse{Size: n}, nil
}

func serveSnapshots(t *testing.T, f *fakeSnapshots) *Snapshots {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	snapshotsapi.RegisterSnapshotsServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return newSnapshots(conn, "overlayfs", 5*time.Second)
}

// TestProgressCountsEachLayerOnce holds Progress's sum to what the
// layers take whatever moment the list caught them in: a layer listed
// active and committed before its measure, one unpacked by two pulls
// side by side, one being committed, and another image's.
func TestProgressCountsEachLayerOnce(t *testing.T) {
	cases := []struct {
		name   string
		names  []string
		sizes  map[string]int64
		layers int
		bytes  int64
		err    error
	}{
		{"committed between list and measure", []string{"a", "extract-1 b"}, map[string]int64{"a": 100, "b": 40}, 2, 140, nil},
		{"active, measured", []string{"a", "extract-1 b"}, map[string]int64{"a": 100, "extract-1 b": 30}, 1, 130, nil},
		{"unpacked twice side by side", []string{"extract-1 b", "extract-2 b"}, map[string]int64{"extract-1 b": 30, "extract-2 b": 10}, 0, 30, nil},
		{"committed and a second unpack", []string{"b", "extract-2 b"}, map[string]int64{"b": 40, "extract-2 b": 10}, 1, 40, nil},
		{"being committed: neither name there", []string{"a", "extract-1 b"}, map[string]int64{"a": 100}, 0, 0, errLayerInFlux},
		{"another image's layer", []string{"a", "extract-1 z"}, map[string]int64{"a": 100, "extract-1 z": 7}, 1, 100, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := serveSnapshots(t, &fakeSnapshots{names: c.names, sizes: c.sizes})
			layers, bytes, err := s.Progress(context.Background(), []string{"a", "b"})
			if !errors.Is(err, c.err) {
				t.Fatalf("Progress: %v, want %v", err, c.err)
			}
			if layers != c.layers || bytes != c.bytes {
				t.Errorf("Progress = %d layers, %d bytes; want %d, %d", layers, bytes, c.layers, c.bytes)
			}
		})
	}
}
