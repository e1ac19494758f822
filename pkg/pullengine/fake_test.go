package pullengine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/warmer-dev/warmer/pkg/criclient"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// digestA is the digest the fake runtime resolves every pull to.
const digestA = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// fakeImageService is a recording fake of the CRI image service. It exists
// for the faults no real part can produce on demand (a pull that hangs until
// the test releases it, a chosen error on a chosen attempt, a disk that
// fills up between two calls) and to count calls exactly; behaviour on real
// containerd is left to the integration tests.
type fakeImageService struct {
	mu          sync.Mutex
	pulls       []fakePull
	inFlight    int
	maxInFlight int
	gates       map[string]chan struct{} // ref -> closed when the pull may finish
	errs        map[string][]error       // ref -> errors for successive attempts
	images      map[string]*runtimeapi.Image
	fsInfo      *runtimeapi.ImageFsInfoResponse
	fsErr       error
	started     chan string // receives each ref as its PullImage starts
	statusCalls []string    // ImageStatus calls, in order
}

// fakePull records one PullImage call; auth is nil for anonymous.
type fakePull struct {
	ref  string
	auth *runtimeapi.AuthConfig
}

var _ ImageService = &fakeImageService{}

func newFakeService() *fakeImageService {
	return &fakeImageService{
		gates:   map[string]chan struct{}{},
		errs:    map[string][]error{},
		images:  map[string]*runtimeapi.Image{},
		started: make(chan string, 100),
	}
}

// block makes pulls of ref hang until the returned release is called.
func (f *fakeImageService) block(ref string) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.gates[ref] = ch
	f.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// failWith makes successive pulls of ref fail with errs, then succeed.
func (f *fakeImageService) failWith(ref string, errs ...error) {
	f.mu.Lock()
	f.errs[ref] = append(f.errs[ref], errs...)
	f.mu.Unlock()
}

func (f *fakeImageService) PullImage(ctx context.Context, ref string, auth *runtimeapi.AuthConfig) (string, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, fakePull{ref, auth})
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	gate := f.gates[ref]
	var err error
	if q := f.errs[ref]; len(q) > 0 {
		err, f.errs[ref] = q[0], q[1:]
	}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	f.started <- ref
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	// As containerd records them: a pull by tag records the tag and the
	// digest it resolved to (always digestA here), one by digest only the
	// digest.
	img := &runtimeapi.Image{Id: "sha256:id-" + ref, Size: 42 << 20}
	if r, perr := imageref.Parse(ref); perr == nil && r.Digest() != "" {
		img.RepoDigests = []string{ref}
	} else if perr == nil {
		img.RepoTags, img.RepoDigests = []string{ref}, []string{r.Name() + "@" + digestA}
	}
	f.images["sha256:id-"+ref] = img
	f.mu.Unlock()
	return "sha256:id-" + ref, nil
}

// ImageStatus finds an image by ID, repo tag or repo digest.
func (f *fakeImageService) ImageStatus(_ context.Context, ref string) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusCalls = append(f.statusCalls, ref)
	if img, ok := f.images[ref]; ok {
		return img, nil
	}
	for _, img := range f.images {
		if slices.Contains(img.GetRepoTags(), ref) || slices.Contains(img.GetRepoDigests(), ref) {
			return img, nil
		}
	}
	return nil, nil
}

func (f *fakeImageService) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Image
	for _, img := range f.images {
		out = append(out, img)
	}
	return out, nil
}

func (f *fakeImageService) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fsInfo == nil && f.fsErr == nil {
		return &runtimeapi.ImageFsInfoResponse{}, nil
	}
	return f.fsInfo, f.fsErr
}

// pulled returns the refs pulled so far, in call order.
func (f *fakeImageService) pulled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.pulls))
	for i, p := range f.pulls {
		out[i] = p.ref
	}
	return out
}

func (f *fakeImageService) pullAt(i int) fakePull {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pulls[i]
}

// waitStarted waits for a PullImage of ref to start.
func (f *fakeImageService) waitStarted(t *testing.T, ref string) {
	t.Helper()
	select {
	case got := <-f.started:
		if got != ref {
			t.Fatalf("pull of %s started, want %s", got, ref)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("pull of %s never started", ref)
	}
}

// harness is an engine over a fake service and a fake clock, with its
// results collected.
type harness struct {
	svc     *fakeImageService
	clock   *testingclock.FakeClock
	eng     *Engine
	results chan Result
	ctx     context.Context
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{svc: newFakeService(), clock: testingclock.NewFakeClock(time.Unix(1_000_000, 0)), results: make(chan Result, 100)}
	opts.Clock = h.clock
	opts.Listener = ListenerFuncs{Finished: func(r Result) { h.results <- r }}
	h.eng = New(h.svc, opts)
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { _ = h.eng.Start(ctx); close(done) }()
	return h
}

// enqueue requests image with the given priority and no credentials.
func (h *harness) enqueue(image string, priority int32) Status {
	return h.eng.Enqueue(h.ctx, Request{Image: image, Priority: priority})
}

// result waits for the next finished job.
func (h *harness) result(t *testing.T) Result {
	t.Helper()
	select {
	case r := <-h.results:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no pull finished")
		return Result{}
	}
}

// noResult checks no job finishes for a short while.
func (h *harness) noResult(t *testing.T) {
	t.Helper()
	select {
	case r := <-h.results:
		t.Fatalf("unexpected result %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
}

// waitTimers waits until n timers are set on the fake clock (pull
// timeouts, throttle waits), so that a Step reaches them.
func (h *harness) waitTimers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.clock.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers set, want %d", h.clock.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// The CRI client is what the agent hands the engine.
var _ ImageService = (*criclient.Client)(nil)

// The runtime's snapshots are what the agent hands the engine.
var _ SnapshotView = (*criclient.Snapshots)(nil)
