package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// hugeCRI is a fake CRI runtime. It exists for one fault that a real
// containerd will not produce on demand: a pull error whose message is
// hundreds of kilobytes long (a registry's HTML error page passed through).
// Images whose name contains "/huge" fail that way; the others "pull".
type hugeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	msg    string
	mu     sync.Mutex
	pulled map[string]*runtimeapi.Image
}

func (f *hugeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (f *hugeCRI) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &runtimeapi.ListImagesResponse{}
	for _, img := range f.pulled {
		resp.Images = append(resp.Images, img)
	}
	return resp, nil
}

func (f *hugeCRI) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: f.pulled[req.GetImage().GetImage()]}, nil
}

func (f *hugeCRI) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *hugeCRI) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if strings.Contains(ref, "/huge") {
		return nil, status.Error(codes.Unknown, f.msg)
	}
	sum := sha256.Sum256([]byte(ref))
	id := "sha256:" + hex.EncodeToString(sum[:])
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulled[ref] = &runtimeapi.Image{Id: id, RepoTags: []string{ref}, Size: 1 << 20}
	return &runtimeapi.PullImageResponse{ImageRef: id}, nil
}

// serveFake serves f on a unix socket under a short directory (socket
// paths must stay under 108 bytes) and returns the endpoint.
func serveFake(t *testing.T, f *hugeCRI) string {
	return "unix://" + testbed.ServeFakeCRI(t, f)
}

// TestHugeRuntimeMessage runs the real agent and controller binaries on a
// real API server against the fake runtime: a 100 KB pull error must come
// out cut to the schema's 224 characters in the NodeWarm and the
// ImageWarm, and under the API's 1024 bytes in the Failed event, with its
// reason; the other image of the same ImageWarm is pulled; the agent stays
// up.
func TestHugeRuntimeMessage(t *testing.T) {
	// Multi-byte runes everywhere, so every cut lands inside one.
	huge := "failed to pull and unpack image: 500 Internal Server Error: <html>" + strings.Repeat("é✓ page ", 12000)
	endpoint := serveFake(t, &hugeCRI{msg: huge, pulled: map[string]*runtimeapi.Image{}})
	cp := testbed.StartControlPlane(t)
	const name = "node-huge"
	cp.CreateNode(t, name, nil)
	fleet := &testbed.Fleet{CP: cp, Bin: testbed.BuildWarmer(t)}
	agent := testbed.StartProcess(t, "agent "+name, append([]string{fleet.Bin, "agent", "--kubeconfig", cp.AgentKubeconfig(t, name),
		"--node-name", name, "--container-runtime-endpoint", endpoint,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, append(testbed.DefaultAgentFlags,
		// The fake reports no image filesystem: without this the disk
		// guard holds every pull (TestUnknownLevelHoldsByDefault).
		"--image-fs-unknown=pull")...)...)
	fleet.Controller = fleet.StartController(t)
	bad, good := "registry.example/team/huge:v1", "registry.example/team/fine:v1"
	fleet.Create(t, build.ImageWarm("default", "huge", build.Images(bad, good)))

	testbed.Eventually(t, 60*time.Second, "NodeWarm: cut message, other image present", func() error {
		return checkHugeNodeWarm(fleet, name, bad, good)
	})
	testbed.Eventually(t, 60*time.Second, "ImageWarm: cut failure message", func() error {
		st := fleet.ImageWarm(t, "default", "huge").Status
		if len(st.Failures) != 1 || st.Failures[0].Reason != "RegistryUnavailable" || len(st.Failures[0].Message) > warmv1.MaxMessageLength ||
			!utf8.ValidString(st.Failures[0].Message) || len(st.Images) != 1 || st.Images[0].Failed != 1 || st.ReadyImages != 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	testbed.Eventually(t, 30*time.Second, "Failed event cut under 1024 bytes", func() error {
		for _, e := range fleet.Events(t, "default", "huge", "Failed") {
			if strings.Contains(e.Note, "RegistryUnavailable") && len(e.Note) <= 1024 && utf8.ValidString(e.Note) &&
				strings.HasSuffix(e.Note, "(node "+name+")") {
				return nil
			}
		}
		return fmt.Errorf("no Failed event with a cut note")
	})
	if agent.Exited() {
		t.Fatalf("the agent exited:\n%s", agent.Log(40))
	}
}

// checkHugeNodeWarm: the failing image's message is cut to the schema's
// bound on a rune boundary, and the other image is present.
func checkHugeNodeWarm(fleet *testbed.Fleet, node, bad, good string) error {
	img, err := fleet.NodeImage(node, bad)
	if err != nil {
		return err
	}
	if img.Reason != "RegistryUnavailable" || len(img.Message) > warmv1.MaxNodeMessageLength ||
		!utf8.ValidString(img.Message) || !strings.HasPrefix(img.Message, "failed to pull") || !strings.Contains(img.Message, " ... ") {
		return fmt.Errorf("reason %q, %d-rune message", img.Reason, utf8.RuneCountInString(img.Message))
	}
	other, err := fleet.NodeImage(node, good)
	if err != nil {
		return err
	}
	if other.State != warmv1.ImagePresent {
		return fmt.Errorf("other image %+v", other)
	}
	return nil
}
