package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// failFirst is an in-memory image service whose first pull fails with
// "not found" and whose later pulls succeed. It is a fake because what the
// test needs is time that moves only when the test moves it: no real
// runtime runs on a fake clock.
type failFirst struct {
	mu     sync.Mutex
	pulls  int
	images []*runtimeapi.Image
}

func (f *failFirst) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.Image(nil), f.images...), nil
}

func (f *failFirst) ImageStatus(_ context.Context, ref string) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, img := range f.images {
		if img.RepoTags[0] == ref {
			return img, nil
		}
	}
	return nil, nil
}

func (f *failFirst) PullImage(_ context.Context, ref string, _ *runtimeapi.AuthConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls++
	if f.pulls == 1 {
		return "", status.Error(codes.NotFound, "failed to resolve reference "+ref+": not found")
	}
	f.images = append(f.images, &runtimeapi.Image{Id: "sha256:clock", RepoTags: []string{ref}, Size: 1 << 20})
	return "sha256:clock", nil
}

func (f *failFirst) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *failFirst) pulled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pulls
}

// TestOneClock drives the agent and its pull engine with one fake clock, as
// cmd/warmer hands one clock to both. A pull fails; the engine's back-off
// runs on that clock, so no wall time brings the retry, only the clock's
// step does; and the NodeWarm's transition time is the clock's, so the
// agent reads the same time the engine stamps its results with.
func TestOneClock(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	node := cp.CreateNode(t, "clock-node", nil)
	t0 := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	svc := &failFirst{}
	startClockAgent(t, cp, node.Name, clk, svc)
	image := "registry.example:5000/clock/app:v1"
	if err := cp.Client.Create(context.Background(), build.ImageWarm("default", "clock", build.Images(image))); err != nil {
		t.Fatal(err)
	}

	testbed.Eventually(t, 30*time.Second, "the failed pull in back-off, at the clock's time", func() error {
		return imageAt(cp, node.Name, image, warmv1.ImageBackOff, t0)
	})
	// Passes on the wall's time do not end the back-off.
	for i := range 3 {
		touchNode(t, cp, node, fmt.Sprint(i))
		time.Sleep(300 * time.Millisecond)
	}
	if n := svc.pulled(); n != 1 {
		t.Fatalf("%d pulls before the clock moved, want 1 (the back-off runs on the fake clock)", n)
	}

	clk.SetTime(t0.Add(time.Minute + time.Second))
	touchNode(t, cp, node, "after")
	testbed.Eventually(t, 30*time.Second, "present after the clock's step", func() error {
		return imageAt(cp, node.Name, image, warmv1.ImagePresent, time.Time{})
	})
	if n := svc.pulled(); n != 2 {
		t.Errorf("%d pulls, want 2", n)
	}
}

// startClockAgent runs an agent and its engine on clk, against svc, the way
// cmd/warmer wires them.
func startClockAgent(t *testing.T, cp *testbed.ControlPlane, node string, clk *testingclock.FakeClock, svc pullengine.ImageService) {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 testbed.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  agent.CacheOptions(node),
		Client:                 agent.ClientOptions(),
		Controller:             config.Controller{SkipNameValidation: &skip},
		Logger:                 logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.NodeAgent{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), NodeName: node,
		ResyncPeriod: time.Hour, Clock: clk}
	engine := pullengine.New(svc, pullengine.Options{DiskThresholdPercent: 100, BackOffInitial: time.Minute,
		BackOffMax: time.Minute, Listener: a.Listener(), Clock: clk})
	a.Engine = engine
	if err := mgr.Add(engine); err != nil {
		t.Fatal(err)
	}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testbed.RunManager(t, mgr)
}

// imageAt checks that the node's NodeWarm reports image in state, since at
// unless at is zero.
func imageAt(cp *testbed.ControlPlane, node, image string, state warmv1.ImageState, at time.Time) error {
	var nw warmv1.NodeWarm
	if err := cp.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw); err != nil {
		return err
	}
	for _, img := range nw.Status.Images {
		if img.Image != image {
			continue
		}
		// A present image reports no transition time (at is zero then).
		if img.State != state || !at.IsZero() && (img.LastTransitionTime == nil || !img.LastTransitionTime.Time.Equal(at)) {
			return fmt.Errorf("%s: %s since %v, want %s since %v", image, img.State, img.LastTransitionTime, state, at)
		}
		return nil
	}
	return fmt.Errorf("%s not reported: %+v", image, nw.Status.Images)
}

// touchNode changes a label of the node, which brings the agent a pass.
func touchNode(t *testing.T, cp *testbed.ControlPlane, node *corev1.Node, v string) {
	t.Helper()
	patch := client.MergeFrom(node.DeepCopy())
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels["clock-test"] = v
	if err := cp.Client.Patch(context.Background(), node, patch); err != nil {
		t.Fatal(err)
	}
}
