package pullengine_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
)

// These tests drive the real engine over the real CRI client, a real
// containerd and real registries. The unit tests (engine_test.go) cover the
// engine's logic against a fake; these check that the runtime's real answers
// reach the right results: classes, digests, sizes, what is left on disk.

// testOptions are the engine options the tests share. The disk guard is
// off: a developer's disk above 80 % would otherwise fail every pull with
// DiskPressure. TestEngineOnRealRuntime/disk_guard reads the real level.
func testOptions(o pullengine.Options) pullengine.Options {
	o.DiskThresholdPercent = 100
	return o
}

// repoDigest is img's "repository@digest" form, as the runtime lists it.
func repoDigest(img testbed.Image) string {
	return img.Ref[:strings.LastIndexByte(img.Ref, ':')] + "@" + img.Digest
}

// TestEngineOnRealRuntime shares one pair of registries, one catalog and
// one containerd among subtests; each subtest has its own engine, so that
// back-off from one does not leak into another.
func TestEngineOnRealRuntime(t *testing.T) {
	skipShort(t)
	regs := testbed.StartRegistries(t)
	cat := regs.LoadCatalog(t, true)
	n := startNode(t, "node-a")

	t.Run("anonymous", func(t *testing.T) { testAnonymous(t, n, cat) })
	t.Run("authenticated", func(t *testing.T) { testAuthenticated(t, n, regs, cat) })
	t.Run("failures", func(t *testing.T) { testFailures(t, n, regs, cat) })
	t.Run("invalid name", func(t *testing.T) { testInvalidName(t, n, cat) })
	t.Run("timeout", func(t *testing.T) { testTimeout(t, n, cat) })
	t.Run("cancel", func(t *testing.T) { testCancel(t, n, cat) })
	t.Run("disk guard", func(t *testing.T) { testDiskGuard(t, n) })
}

// testAnonymous pulls public images of each shape and checks what the
// result reports against what was pushed and what the runtime lists.
func testAnonymous(t *testing.T, n *node, cat testbed.Catalog) {
	e := startEngine(t, n.cri, testOptions(pullengine.Options{MaxParallelPulls: 3}))
	imgs := map[string]testbed.Image{"small": cat.Small, "medium": cat.Medium, "layered": cat.Layered, "multi-arch": cat.MultiArch}
	for _, img := range imgs {
		e.Enqueue(e.ctx, pullengine.Request{Image: img.Ref})
	}
	results := e.resultsByRef(t, len(imgs))
	for name, img := range imgs {
		t.Run(name, func(t *testing.T) {
			checkPulled(t, n, results[img.Ref], img)
		})
	}
}

// checkPulled checks a successful result and that the runtime holds img.
func checkPulled(t *testing.T, n *node, res pullengine.Result, img testbed.Image) {
	t.Helper()
	if !res.Succeeded() {
		t.Fatalf("pull of %s: %s: %s", img.Ref, res.Class, res.Message)
	}
	if !strings.HasPrefix(res.ImageRef, "sha256:") || res.Attempts != 1 {
		t.Errorf("result %+v, want an image ID after one attempt", res)
	}
	// For a multi-arch image this is the index's digest, which is what a
	// pod spec pinning it would name.
	if res.Digest != repoDigest(img) {
		t.Errorf("digest %q, want %q", res.Digest, repoDigest(img))
	}
	if res.Size < uint64(img.Size) || res.Size > uint64(img.Size)+testbed.MB {
		t.Errorf("size %d, want about %d", res.Size, img.Size)
	}
	if !n.listed(t, img.Ref) || !n.listed(t, repoDigest(img)) {
		t.Errorf("%s not listed by the runtime after a successful pull", img.Ref)
	}
}

// testAuthenticated pulls from the registry with basic auth, with a keyring
// built from dockerconfigjson content, as the agent builds it from a pull
// secret.
func testAuthenticated(t *testing.T, n *node, regs testbed.Registries, cat testbed.Catalog) {
	user, pass := regs.Auth.Username(), regs.Auth.Password()
	t.Run("one login", func(t *testing.T) {
		e := startEngine(t, n.cri, testOptions(pullengine.Options{}))
		kr := keyringFor(t, map[string][2]string{regs.Auth.Host: {user, pass}})
		res := e.pullOne(t, pullengine.Request{Image: cat.Private.Ref, Keyring: kr})
		checkPulled(t, n, res, cat.Private)
	})
	t.Run("wrong login first", func(t *testing.T) {
		// The more specific key (with a path) is tried first; its 401 must
		// move the engine on to the next candidate rather than fail.
		other := regs.Auth.PushRandom(t, "private/other:v1", testbed.ImageOptions{LayerSize: testbed.MB})
		e := startEngine(t, n.cri, testOptions(pullengine.Options{}))
		kr := keyringFor(t, map[string][2]string{regs.Auth.Host + "/private": {user, "wrong"}, regs.Auth.Host: {user, pass}})
		res := e.pullOne(t, pullengine.Request{Image: other.Ref, Keyring: kr})
		if !res.Succeeded() || res.Attempts != 2 {
			t.Fatalf("result %s %q after %d attempts, want success on the second", res.Class, res.Message, res.Attempts)
		}
		if !n.listed(t, other.Ref) {
			t.Errorf("%s not listed", other.Ref)
		}
	})
}

// testFailures checks the class of each kind of failure the runtime really
// reports, all pulled at once through one engine.
func testFailures(t *testing.T, n *node, regs testbed.Registries, cat testbed.Catalog) {
	n.removeAll(t) // so that "not listed" means the failed pull left nothing
	pass := regs.Auth.Password()
	wrong := keyringFor(t, map[string][2]string{regs.Auth.Host: {regs.Auth.Username(), "not-" + pass}})
	tests := []struct {
		name  string
		req   pullengine.Request
		class pullengine.Class
	}{
		{"wrong password", pullengine.Request{Image: cat.Private.Ref, Keyring: wrong}, pull.ClassUnauthorized},
		// Another tag: one reference twice would share one job. The
		// registry refuses before looking the tag up.
		{"no credentials", pullengine.Request{Image: regs.Auth.Ref("private/app:v2")}, pull.ClassUnauthorized},
		{"missing tag", pullengine.Request{Image: regs.Anon.Ref("test/small:nope")}, pull.ClassNotFound},
		{"missing repository", pullengine.Request{Image: regs.Anon.Ref("test/none:v1")}, pull.ClassNotFound},
		{"missing digest", pullengine.Request{Image: regs.Anon.Ref("test/small@sha256:" + strings.Repeat("0", 64))}, pull.ClassNotFound},
		{"closed port", pullengine.Request{Image: fmt.Sprintf("127.0.0.1:%d/test/small:v1", testbed.FreePort(t))}, pull.ClassRegistryUnavailable},
		{"arm64-only index", pullengine.Request{Image: cat.ArmOnly.Ref}, pull.ClassNoMatchingPlatform},
	}
	e := startEngine(t, n.cri, testOptions(pullengine.Options{MaxParallelPulls: 4}))
	for _, tt := range tests {
		e.Enqueue(e.ctx, tt.req)
	}
	results := e.resultsByRef(t, len(tests))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := imageref.Parse(tt.req.Image)
			if err != nil {
				t.Fatal(err)
			}
			checkFailed(t, e, n, results[ref.String()], tt.class, pass)
		})
	}
}

// checkFailed checks a failed result: its class, a message that does not
// leak the password, back-off started, and nothing left in the runtime.
func checkFailed(t *testing.T, e *engine, n *node, res pullengine.Result, class pullengine.Class, password string) {
	t.Helper()
	if res.Class != class {
		t.Fatalf("%s: class %q (%s), want %q", res.Image, res.Class, res.Message, class)
	}
	if res.Message == "" || strings.Contains(res.Message, password) {
		t.Errorf("message %q: want the runtime's reason, without the password", res.Message)
	}
	if res.RetryAt.IsZero() {
		t.Errorf("no back-off after %s", class)
	}
	if st, ok := e.Status(res.Image); !ok || st.State != pull.StateBackOff {
		t.Errorf("Status = %+v, want BackOff", st)
	}
	if n.listed(t, res.Ref) {
		t.Errorf("%s listed after a failed pull", res.Ref)
	}
}

// testInvalidName checks that malformed references are answered without a
// single call to the runtime. The counting decorator sees every call the
// engine makes; a valid pull afterwards shows the engine was running and
// would have made one.
func testInvalidName(t *testing.T, n *node, cat testbed.Catalog) {
	svc := newCountingService(n.cri)
	e := startEngine(t, svc, testOptions(pullengine.Options{}))
	for _, image := range []string{"", "not a ref", "127.0.0.1:5000/Test/UPPER:v1", cat.Small.Ref + "@sha256:abc", strings.Repeat("0", 64)} {
		st := e.Enqueue(e.ctx, pullengine.Request{Image: image})
		if st.State != pull.StateFailed || st.Last == nil || st.Last.Class != pull.ClassInvalidImageName {
			t.Errorf("Enqueue(%q) = %+v, want Failed with InvalidImageName", image, st)
		}
	}
	if got := svc.totalCalls(); got != 0 {
		t.Fatalf("%d runtime calls for invalid names, want none", got)
	}
	if res := e.pullOne(t, pullengine.Request{Image: cat.Small.Ref}); !res.Succeeded() {
		t.Fatalf("valid pull after the invalid ones: %s: %s", res.Class, res.Message)
	}
	if got := svc.pullsOf(cat.Small.Ref); got != 1 || svc.peak() != 1 {
		t.Errorf("%d pulls of %s, peak %d: want exactly the one valid pull", got, cat.Small.Ref, svc.peak())
	}
}

// testTimeout cuts a 100 MB pull (about 0.7 s on an idle test machine) at
// 200 ms: the result says Timeout, and the runtime holds nothing of it,
// which is what lets the agent simply try again later.
func testTimeout(t *testing.T, n *node, cat testbed.Catalog) {
	const limit = 200 * time.Millisecond
	e := startEngine(t, n.cri, testOptions(pullengine.Options{}))
	res := e.pullOne(t, pullengine.Request{Image: cat.Large.Ref, Timeout: limit})
	if res.Class != pull.ClassTimeout {
		t.Fatalf("class %q (%s) after %s, want Timeout", res.Class, res.Message, res.Duration)
	}
	if !strings.Contains(res.Message, limit.String()) || res.RetryAt.IsZero() {
		t.Errorf("result %+v: want the limit in the message and a back-off", res)
	}
	// The runtime must have stopped too, not just the engine waiting.
	if res.Duration > limit+5*time.Second {
		t.Errorf("timed-out pull took %s", res.Duration)
	}
	for _, ref := range []string{cat.Large.Ref, repoDigest(cat.Large)} {
		if n.listed(t, ref) {
			t.Errorf("%s listed after a timed-out pull", ref)
		}
	}
	// What an interrupted pull leaves in containerd's content store must
	// not spoil the next one (a fresh engine: this one is backing off).
	e2 := startEngine(t, n.cri, testOptions(pullengine.Options{}))
	checkPulled(t, n, e2.pullOne(t, pullengine.Request{Image: cat.Large.Ref}), cat.Large)
}

// testCancel cancels a 100 MB pull a moment after the runtime started it,
// as the agent does when an image is no longer wanted: the result says
// Canceled, starts no back-off, and the runtime holds nothing of it.
func testCancel(t *testing.T, n *node, cat testbed.Catalog) {
	n.removeAll(t)
	started := make(chan struct{}, 1)
	e := startEngine(t, n.cri, testOptions(pullengine.Options{
		Listener: pullengine.ListenerFuncs{Started: func(imageref.Reference, string) { started <- struct{}{} }},
	}))
	e.Enqueue(e.ctx, pullengine.Request{Image: cat.Large.Ref})
	<-started
	time.Sleep(100 * time.Millisecond) // into the download
	if !e.Cancel(cat.Large.Ref) {
		t.Fatal("Cancel found no pull to cancel")
	}
	res := e.result(t)
	if res.Class != pull.ClassCanceled || !res.RetryAt.IsZero() {
		t.Fatalf("result %s (%s), retry at %v: want Canceled without back-off", res.Class, res.Message, res.RetryAt)
	}
	if st, known := e.Status(cat.Large.Ref); known {
		t.Errorf("Status after Cancel = %+v, want the image forgotten", st)
	}
	if n.listed(t, cat.Large.Ref) {
		t.Errorf("%s listed after a cancelled pull", cat.Large.Ref)
	}
}

// testDiskGuard checks that the guard can read the real image filesystem:
// containerd reports its mountpoint, and statfs on it gives a size.
func testDiskGuard(t *testing.T, n *node) {
	e := newEngine(t, n.cri, pullengine.Options{})
	u := e.DiskUsage(e.ctx)
	if !u.Known || u.CapacityBytes == 0 || u.Percent < 0 || u.Percent > 100 {
		t.Fatalf("disk usage %+v, want a known level", u)
	}
	if !strings.HasPrefix(u.Mountpoint, filepath.Join(n.ctd.Dir, "root")+"/") {
		t.Errorf("mountpoint %q is not under containerd's root in %s", u.Mountpoint, n.ctd.Dir)
	}
}

// TestEngineParallelCap pulls ten distinct 20 MB images with
// MaxParallelPulls 3: the runtime never sees more than three pulls at once,
// does see three (a serial engine would pass a mere upper bound), and ends
// up holding all ten.
func TestEngineParallelCap(t *testing.T) {
	skipShort(t)
	const images, limit = 10, 3
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "par"})
	imgs := pushDistinct(t, reg, images, 20*testbed.MB)
	n := startNode(t, "node-p")
	svc := newCountingService(n.cri)
	e := startEngine(t, svc, testOptions(pullengine.Options{MaxParallelPulls: limit}))

	e.Sync(e.ctx, requests(imgs))
	results := e.resultsByRef(t, images)
	if got := svc.peak(); got != limit {
		t.Errorf("at most %d pulls ran at once, want %d", got, limit)
	}
	for _, img := range imgs {
		if res := results[img.Ref]; !res.Succeeded() {
			t.Errorf("%s: %s: %s", img.Ref, res.Class, res.Message)
		}
		if svc.pullsOf(img.Ref) != 1 {
			t.Errorf("%s pulled %d times, want once", img.Ref, svc.pullsOf(img.Ref))
		}
		if !n.listed(t, img.Ref) {
			t.Errorf("%s not listed", img.Ref)
		}
	}
}

// pushDistinct pushes count random images of one layer of size bytes.
func pushDistinct(tb testing.TB, reg *testbed.Registry, count int, size int64) []testbed.Image {
	tb.Helper()
	imgs := make([]testbed.Image, count)
	for i := range imgs {
		imgs[i] = reg.PushRandom(tb, fmt.Sprintf("test/par%d:v1", i), testbed.ImageOptions{LayerSize: size})
	}
	return imgs
}

// requests asks for each image, anonymously.
func requests(imgs []testbed.Image) []pullengine.Request {
	reqs := make([]pullengine.Request, len(imgs))
	for i, img := range imgs {
		reqs[i] = pullengine.Request{Image: img.Ref}
	}
	return reqs
}

// dedupSpellings all name docker.io/library/warmtest:latest. Docker Hub
// names are the ones with several spellings; the test containerd serves
// them from a local mirror.
var dedupSpellings = []string{
	"warmtest",
	"library/warmtest",
	"docker.io/library/warmtest",
	"docker.io/library/warmtest:latest",
	"index.docker.io/library/warmtest:latest",
}

// TestEngineDeduplicates requests one image five times, in five spellings
// and from five goroutines, and checks the runtime is asked once: while the
// requests are queued, and while the pull is running.
func TestEngineDeduplicates(t *testing.T) {
	skipShort(t)
	const ref = "docker.io/library/warmtest:latest"
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "hub"})
	reg.PushRandom(t, "library/warmtest:latest", testbed.ImageOptions{LayerSize: 20 * testbed.MB})
	n := startNode(t, "node-d", testbed.WithMirror("docker.io", reg.Host))

	t.Run("queued", func(t *testing.T) {
		svc := newCountingService(n.cri)
		e := newEngine(t, svc, testOptions(pullengine.Options{MaxParallelPulls: 5}))
		for i, st := range enqueueAll(e, dedupSpellings) {
			if st.Ref != ref || st.State != pull.StateQueued {
				t.Errorf("Enqueue(%s) = %+v, want %s queued", dedupSpellings[i], st, ref)
			}
		}
		e.start()
		checkPulledOnce(t, e, svc, n, ref)
	})
	n.removeAll(t)
	t.Run("pulling", func(t *testing.T) {
		// The listener hears of the pull before the runtime is called and
		// holds it back until the other spellings are in: all four find
		// the pull running, whatever the machine's speed.
		var mu sync.Mutex
		var during []pullengine.Status
		svc := newCountingService(n.cri)
		var e *engine
		started := func(imageref.Reference, string) {
			st := enqueueAll(e, dedupSpellings[1:])
			mu.Lock()
			during = append(during, st...)
			mu.Unlock()
		}
		e = newEngine(t, svc, testOptions(pullengine.Options{MaxParallelPulls: 5, Listener: pullengine.ListenerFuncs{Started: started}}))
		e.start().Enqueue(e.ctx, pullengine.Request{Image: dedupSpellings[0]})
		checkPulledOnce(t, e, svc, n, ref)
		mu.Lock()
		defer mu.Unlock()
		for i, st := range during {
			if st.Ref != ref || st.State != pull.StatePulling {
				t.Errorf("Enqueue(%s) during the pull = %+v, want %s pulling", dedupSpellings[i+1], st, ref)
			}
		}
	})
}

// enqueueAll enqueues every spelling at once, one goroutine each, and
// returns the statuses in the order of spellings.
func enqueueAll(e *engine, spellings []string) []pullengine.Status {
	out := make([]pullengine.Status, len(spellings))
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range spellings {
		wg.Go(func() {
			<-ready
			out[i] = e.Enqueue(e.ctx, pullengine.Request{Image: s})
		})
	}
	close(ready)
	wg.Wait()
	return out
}

// checkPulledOnce waits for the one result and checks that no other pull
// was asked of the runtime, nor is still pending in the engine.
func checkPulledOnce(t *testing.T, e *engine, svc *countingService, n *node, ref string) {
	t.Helper()
	res := e.result(t)
	if !res.Succeeded() || res.Ref != ref {
		t.Fatalf("result %+v, want %s pulled", res, ref)
	}
	if got := svc.pullsOf(ref); got != 1 || svc.peak() != 1 {
		t.Errorf("%d PullImage calls (peak %d), want 1", got, svc.peak())
	}
	for _, s := range dedupSpellings {
		if st, _ := e.Status(s); st.State != pull.StatePulled {
			t.Errorf("Status(%s) = %s, want Pulled with nothing pending", s, st.State)
		}
	}
	select {
	case r := <-e.results:
		t.Errorf("a second result: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	if !n.listed(t, ref) {
		t.Errorf("%s not listed", ref)
	}
}

// TestEngineRuntimeDown checks what a pull reports when containerd is not
// there: a failure of the node, not of the image (not RegistryUnavailable,
// whatever "connection refused" the message holds), with the gRPC code
// kept in Result.Err for the agent.
func TestEngineRuntimeDown(t *testing.T) {
	skipShort(t)
	n := startNode(t, "node-x")
	e := startEngine(t, n.cri, testOptions(pullengine.Options{}))
	n.ctd.Stop()
	res := e.pullOne(t, pullengine.Request{Image: "127.0.0.1:1/test/small:v1"})
	if res.Class != pull.ClassErrImagePull || status.Code(res.Err) != codes.Unavailable {
		t.Fatalf("result %s (%v), want ErrImagePull with code Unavailable", res.Class, res.Err)
	}
}
