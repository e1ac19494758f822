package pullengine_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/go-logr/logr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
)

// Helpers for the tests and the benchmark that drive the engine over the
// real CRI client, real containerd and real registries (test/testbed).

// waitLimit bounds every wait on the test bed: its machines have two shared
// cores, and timings there roughly triple when the other core is busy.
const waitLimit = 2 * time.Minute

// skipShort skips tests that need the test bed under -short.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the test bed (real containerd and registries); skipped with -short")
	}
}

// countingService is the only stand-in these tests use, and it stands in
// for nothing: it forwards every call to the real client unchanged and
// records what went through, which the runtime cannot tell afterwards (how
// many pulls of one image were asked for, how many ran at once).
type countingService struct {
	pullengine.ImageService

	mu          sync.Mutex
	calls       int            // every call, of any method
	pulls       map[string]int // PullImage calls by reference
	inFlight    int
	maxInFlight int
}

var _ pullengine.ImageService = (*countingService)(nil)

func newCountingService(svc pullengine.ImageService) *countingService {
	return &countingService{ImageService: svc, pulls: map[string]int{}}
}

// PullImage counts the call and how many run at once, then pulls.
func (c *countingService) PullImage(ctx context.Context, ref string, auth *runtimeapi.AuthConfig) (string, error) {
	c.mu.Lock()
	c.calls++
	c.pulls[ref]++
	c.inFlight++
	c.maxInFlight = max(c.maxInFlight, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.ImageService.PullImage(ctx, ref, auth)
}

// ListImages counts the call and forwards it.
func (c *countingService) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	c.count()
	return c.ImageService.ListImages(ctx)
}

// ImageStatus counts the call and forwards it.
func (c *countingService) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	c.count()
	return c.ImageService.ImageStatus(ctx, ref)
}

// ImageFsInfo counts the call and forwards it.
func (c *countingService) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	c.count()
	return c.ImageService.ImageFsInfo(ctx)
}

func (c *countingService) count() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

// totalCalls is the number of calls of any method so far.
func (c *countingService) totalCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// pullsOf is the number of PullImage calls for ref so far.
func (c *countingService) pullsOf(ref string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pulls[ref]
}

// peak is the largest number of PullImage calls seen running at once.
func (c *countingService) peak() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxInFlight
}

// node is one simulated node: a real containerd and the agent's real CRI
// client to it.
type node struct {
	ctd *testbed.Containerd
	cri *criclient.Client
}

// onEachContainerd runs f as a subtest on each containerd the bed runs
// (1.6 and 2.x), with the options that start it; not under -short.
func onEachContainerd(t *testing.T, f func(*testing.T, []testbed.ContainerdOption)) {
	skipShort(t)
	for _, v := range testbed.ContainerdVersions() {
		t.Run(v.Name, func(t *testing.T) { f(t, v.Options(t)) })
	}
}

// askUntilListed asks for req's image, fails the test unless the
// runtime lists it within limit, and logs how long that took; what and
// beside name the image and what else runs, in messages.
func askUntilListed(t *testing.T, e *engine, n *node, req pullengine.Request, limit time.Duration, what, beside string) {
	t.Helper()
	asked := time.Now()
	if st := e.Enqueue(e.ctx, req); st.State != pull.StateQueued {
		t.Fatalf("Enqueue(%s) = %+v", req.Image, st)
	}
	testbed.Eventually(t, limit, what+" present "+beside, func() error {
		if !n.listed(t, req.Image) {
			return fmt.Errorf("%s not listed", req.Image)
		}
		return nil
	})
	t.Logf("%s was in %s after it was asked for", what, time.Since(asked).Round(100*time.Millisecond))
}

// startNode starts a containerd and connects the client to it.
func startNode(tb testing.TB, name string, opts ...testbed.ContainerdOption) *node {
	tb.Helper()
	ctd := testbed.StartContainerd(tb, name, opts...)
	ctx, cancel := context.WithTimeout(quiet(), waitLimit)
	defer cancel()
	cri, err := criclient.New(ctx, criclient.Config{Endpoint: ctd.Endpoint})
	if err != nil {
		tb.Fatalf("connecting to %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = cri.Close() })
	return &node{ctd: ctd, cri: cri}
}

// views are the node's content store and snapshots: what the agent gives
// the engine to follow a pull's download and unpack on containerd.
func (n *node) views(tb testing.TB) (*criclient.ContentStore, *criclient.Snapshots) {
	tb.Helper()
	store, err := n.cri.ContentStore(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	snaps, err := n.cri.Snapshots(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return store, snaps
}

// listed reports whether the runtime lists ref (fully qualified, as the
// test bed's references are) among its repo tags or repo digests. It reads
// ListImages directly rather than through the engine's Presence, so that a
// bug there cannot hide one in the engine.
func (n *node) listed(tb testing.TB, ref string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	imgs, err := n.cri.ListImages(ctx)
	if err != nil {
		tb.Fatalf("ListImages: %v", err)
	}
	for _, img := range imgs {
		if slices.Contains(img.GetRepoTags(), ref) || slices.Contains(img.GetRepoDigests(), ref) {
			return true
		}
	}
	return false
}

// removeAll removes every image the runtime holds, leaving it as fresh as
// a new one as far as pulls go: containerd's CRI deletes synchronously, so
// content and snapshots are gone when RemoveImage returns.
func (n *node) removeAll(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	imgs, err := n.cri.ListImages(ctx)
	if err != nil {
		tb.Fatalf("ListImages: %v", err)
	}
	for _, img := range imgs {
		if err := n.cri.RemoveImage(ctx, img.GetId()); err != nil {
			tb.Fatalf("RemoveImage(%s): %v", img.GetId(), err)
		}
	}
	if imgs, err = n.cri.ListImages(ctx); err != nil || len(imgs) > 0 {
		tb.Fatalf("after removing everything, ListImages = %d images, %v", len(imgs), err)
	}
}

// quiet is a context whose logger discards: results are what the tests
// check. (The engine and the client discard without one too; the logger
// is set to say so.)
func quiet() context.Context {
	return logr.NewContext(context.Background(), logr.Discard())
}

// engine is an engine whose results are collected.
type engine struct {
	*pullengine.Engine
	ctx     context.Context
	results chan pullengine.Result
	started atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// newEngine makes an engine over svc without starting it, so that requests
// can be queued first. opts.Listener, if set, is still called.
func newEngine(tb testing.TB, svc pullengine.ImageService, opts pullengine.Options) *engine {
	tb.Helper()
	e := &engine{results: make(chan pullengine.Result, 100), done: make(chan struct{})}
	inner := opts.Listener
	if inner == nil {
		inner = pullengine.ListenerFuncs{}
	}
	opts.Listener = pullengine.ListenerFuncs{
		Started: inner.PullStarted,
		Finished: func(r pullengine.Result) {
			inner.PullFinished(r)
			e.results <- r
		},
	}
	if opts.DiskThresholdPercent == 0 {
		// As the bed's agents: its runtimes' folders share the machine's
		// disk with builds and caches, often past 80 %, and others' writes
		// there would stop these pulls (testbed.DefaultAgent).
		opts.DiskThresholdPercent = testbed.DefaultAgent.DiskThresholdPercent
	}
	e.Engine = pullengine.New(svc, opts)
	e.ctx, e.cancel = context.WithCancel(quiet())
	tb.Cleanup(func() { e.stop(tb) })
	return e
}

// stop stops the engine and waits until its pulls have ended. It may be
// called more than once.
func (e *engine) stop(tb testing.TB) {
	tb.Helper()
	e.cancel()
	if !e.started.Load() {
		return
	}
	select {
	case <-e.done:
	case <-time.After(waitLimit):
		tb.Errorf("engine did not stop")
	}
}

// start runs the engine until the test ends.
func (e *engine) start() *engine {
	e.started.Store(true)
	go func() { _ = e.Start(e.ctx); close(e.done) }()
	return e
}

// startEngine makes and starts an engine.
func startEngine(tb testing.TB, svc pullengine.ImageService, opts pullengine.Options) *engine {
	tb.Helper()
	return newEngine(tb, svc, opts).start()
}

// result waits for the next finished pull.
func (e *engine) result(tb testing.TB) pullengine.Result {
	tb.Helper()
	select {
	case r := <-e.results:
		return r
	case <-time.After(waitLimit):
		tb.Fatal("no pull finished")
		return pullengine.Result{}
	}
}

// resultsByRef waits for n finished pulls and indexes them by normalised
// reference; a second result for one reference fails the test.
func (e *engine) resultsByRef(tb testing.TB, n int) map[string]pullengine.Result {
	tb.Helper()
	out := make(map[string]pullengine.Result, n)
	for range n {
		r := e.result(tb)
		if _, dup := out[r.Ref]; dup {
			tb.Fatalf("two results for %s", r.Ref)
		}
		out[r.Ref] = r
	}
	return out
}

// pullOne enqueues req and waits for its result.
func (e *engine) pullOne(tb testing.TB, req pullengine.Request) pullengine.Result {
	tb.Helper()
	if st := e.Enqueue(e.ctx, req); st.State != pull.StateQueued && st.State != pull.StatePulling {
		tb.Fatalf("Enqueue(%s) = %+v, want it queued", req.Image, st)
	}
	return e.result(tb)
}

// keyringFor builds a keyring the way the agent does: from the content of
// a kubernetes.io/dockerconfigjson secret, one login per registry key, in
// the "auth" form the docker CLI writes.
func keyringFor(tb testing.TB, logins map[string][2]string) *pullengine.Keyring {
	tb.Helper()
	type entry struct {
		Auth string `json:"auth"`
	}
	auths := map[string]entry{}
	for key, up := range logins {
		auths[key] = entry{Auth: base64.StdEncoding.EncodeToString([]byte(up[0] + ":" + up[1]))}
	}
	payload, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		tb.Fatal(err)
	}
	kr := pullengine.NewKeyring()
	err = kr.AddSecret(pullengine.SecretTypeDockerConfigJSON, map[string][]byte{pullengine.DockerConfigJSONKey: payload})
	if err != nil {
		tb.Fatalf("keyring from a dockerconfigjson payload: %v", err)
	}
	return kr
}
