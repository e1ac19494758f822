package testbed

import (
	"net"
	"path/filepath"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRIServer is a stand-in CRI runtime: both of CRI's services.
type CRIServer interface {
	runtimeapi.RuntimeServiceServer
	runtimeapi.ImageServiceServer
}

// ServeFakeCRI serves srv on a fresh unix socket (in a short directory,
// unix socket paths being bounded) until the test ends, and returns the
// socket's path. For unit tests of faults no real runtime produces on
// demand.
func ServeFakeCRI(t TB, srv CRIServer) string {
	t.Helper()
	sock := filepath.Join(shortDir(t, "fcri"), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, srv)
	runtimeapi.RegisterImageServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return sock
}
