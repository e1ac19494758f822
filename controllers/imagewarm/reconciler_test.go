package imagewarm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// testWriteInterval is the reconciler's MinWriteInterval in the envtest
// suite: short, to keep the suite fast, and long enough that a write made
// at once is told from one that waited for the interval on a busy machine.
const testWriteInterval = 2 * time.Second

// TestImageWarmController runs the status controller against a real API
// server, with NodeWarms written by hand as agents would write them.
func TestImageWarmController(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	startImageWarmController(t, cp)
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "web"}}

	cp.CreateNode(t, "iw-a1", map[string]string{"zone": "a"})
	cp.CreateNode(t, "iw-a2", map[string]string{"zone": "a"})
	cp.CreateNode(t, "iw-b1", map[string]string{"zone": "b"})
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name},
		Spec: warmv1.ImageWarmSpec{
			Images:       []warmv1.ImageReference{"nginx:1.27", "registry.example:5000/team/app:v1"},
			NodeSelector: iwZone("a"),
		},
	}
	if err := cp.Client.Create(t.Context(), iw); err != nil {
		t.Fatal(err)
	}
	nginx, app := "nginx:1.27", "registry.example:5000/team/app:v1"

	t.Run("no reports", func(t *testing.T) {
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(
				iwCounts(st, warmv1.NodeCounts{Matching: 2, NotReporting: 2}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonNotReporting),
				iwCond(st, warmv1.ConditionProgressing, metav1.ConditionTrue, warmv1.ReasonNotReporting),
				iwGeneration(st, 1))
		})
	})

	t.Run("pulling", func(t *testing.T) {
		e.putReport("iw-a1", iwWebAt(1), iwWithDigest(iwImg(nginx, warmv1.ImagePresent), iwDigestA), iwWithDigest(iwImg(app, warmv1.ImagePresent), iwDigestA))
		e.putReport("iw-a2", iwWebAt(1), iwWithDigest(iwImg(nginx, warmv1.ImagePresent), iwDigestA), iwImg(app, warmv1.ImagePulling))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(
				iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 1, Pulling: 1}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonPulling),
				iwCond(st, warmv1.ConditionProgressing, metav1.ConditionTrue, warmv1.ReasonPulling),
				iwReadyImages(st, 1),
				iwPending(st, warmv1.ImageFleetStatus{Image: app, Ready: 1, Pulling: 1}))
		})
	})

	t.Run("ready, and kubectl wait sees it", func(t *testing.T) {
		wait := e.startKubectlWait(t)
		e.putReport("iw-a2", iwWebAt(1), iwWithDigest(iwImg(nginx, warmv1.ImagePresent), iwDigestA), iwWithDigest(iwImg(app, warmv1.ImagePresent), iwDigestA))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(
				iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 2}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm),
				iwCond(st, warmv1.ConditionProgressing, metav1.ConditionFalse, warmv1.ReasonAllNodesWarm),
				iwCond(st, warmv1.ConditionDegraded, metav1.ConditionFalse, warmv1.ReasonNoFailures),
				iwReadyImages(st, 2))
		})
		wait()
	})

	t.Run("failure", func(t *testing.T) {
		e.putReport("iw-a2", iwWebAt(1), iwWithDigest(iwImg(nginx, warmv1.ImagePresent), iwDigestA), iwFailing(app, warmv1.ImageBackOff, "Unauthorized", "401 Unauthorized"))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			want := []warmv1.NodeFailure{{Node: "iw-a2", Image: app, Reason: "Unauthorized", Message: "401 Unauthorized"}}
			if fmt.Sprint(st.Failures) != fmt.Sprint(want) {
				return fmt.Errorf("failures %+v", st.Failures)
			}
			return iwAll(
				iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 1, Failed: 1}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonNodesFailed),
				iwCond(st, warmv1.ConditionDegraded, metav1.ConditionTrue, warmv1.ReasonPullFailed),
				iwReadyImages(st, 1),
				iwPending(st, warmv1.ImageFleetStatus{Image: app, Ready: 1, Failed: 1}))
		})
	})

	t.Run("relabelled node", func(t *testing.T) {
		e.setZone("iw-b1", "a")
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwCounts(st, warmv1.NodeCounts{Matching: 3, Ready: 1, Failed: 1, NotReporting: 1})
		})
		e.setZone("iw-b1", "b")
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 1, Failed: 1})
		})
	})

	t.Run("new generation", func(t *testing.T) {
		e.update(func(iw *warmv1.ImageWarm) { iw.Spec.Images = append(iw.Spec.Images, "busybox") })
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(
				iwGeneration(st, 2),
				iwCounts(st, warmv1.NodeCounts{Matching: 2, NotReporting: 2}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonNotReporting))
		})
		for _, n := range []string{"iw-a1", "iw-a2"} {
			e.putReport(n, iwWebAt(2), iwImg(nginx, warmv1.ImagePresent), iwImg(app, warmv1.ImagePresent), iwImg("busybox", warmv1.ImagePresent))
		}
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(
				iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 2}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm))
		})
	})

	t.Run("no writes without a change", func(t *testing.T) {
		before := e.get().ResourceVersion
		unchanged := iwMetricValue(t, "warmer_imagewarm_status_writes_total", "result", statusUnchanged)
		// A report that changes, but not for this ImageWarm, is folded
		// again and must leave the status as it is.
		e.putReport("iw-a1", iwWebAt(2), iwImg(nginx, warmv1.ImagePresent), iwImg(app, warmv1.ImagePresent), iwImg("busybox", warmv1.ImagePresent), iwImg("redis", warmv1.ImageFailed))
		time.Sleep(2 * time.Second)
		if after := e.get().ResourceVersion; after != before {
			t.Errorf("status written without a change: resourceVersion %s -> %s", before, after)
		}
		if iwMetricValue(t, "warmer_imagewarm_status_writes_total", "result", statusUnchanged) <= unchanged {
			t.Error("the report change did not cause a reconcile")
		}
	})

	t.Run("progress is rate-limited, the result is written", func(t *testing.T) {
		w := e.watch(t)
		const flips = 16
		start := time.Now()
		for i := range flips {
			// busybox comes and goes while app pulls: every report
			// changes the counts, and none settles.
			state := warmv1.ImagePulling
			if i%2 == 1 {
				state = warmv1.ImagePresent
			}
			e.putReport("iw-a2", iwWebAt(2), iwImg(nginx, warmv1.ImagePresent), iwImg(app, warmv1.ImagePulling), iwImg("busybox", state))
			time.Sleep(250 * time.Millisecond)
		}
		e.putReport("iw-a2", iwWebAt(2), iwImg(nginx, warmv1.ImagePresent), iwImg(app, warmv1.ImagePresent), iwImg("busybox", warmv1.ImagePresent))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwCounts(st, warmv1.NodeCounts{Matching: 2, Ready: 2})
		})
		time.Sleep(testWriteInterval + time.Second)
		writes := w.count()
		// One progress write per interval and one at the start, and the
		// result.
		limit := int(time.Since(start)/testWriteInterval) + 2
		t.Logf("%d status writes for %d report changes in %v", writes, flips+1, time.Since(start).Round(time.Millisecond))
		if writes > limit {
			t.Errorf("%d status writes, more than one per %v and the result (%d)", writes, testWriteInterval, limit)
		}
		if writes < 2 {
			t.Errorf("only %d status writes for %d changes", writes, flips+1)
		}
	})

	t.Run("a one-node warm is Ready as its last report comes, in three writes", func(t *testing.T) {
		testOneNodeWarm(t, cp)
	})

	t.Run("deletion drops the metric series", func(t *testing.T) {
		if n := iwNodeSeries(t, e.key.Name); n == 0 {
			t.Fatal("no warmer_imagewarm_nodes series before deletion")
		}
		if err := cp.Client.Delete(t.Context(), e.get()); err != nil {
			t.Fatal(err)
		}
		iwEventually(t, "series deleted", func() error {
			if n := iwNodeSeries(t, e.key.Name); n != 0 {
				return fmt.Errorf("%d series left", n)
			}
			return nil
		})
	})
}

// testOneNodeWarm plays BenchmarkTimeToWarm's warm against the controller:
// one node, ten images, an agent that writes its NodeWarm twice (under way,
// done). The report that all is present comes right after the controller's
// progress write; Ready must follow it at once, not an interval later, and
// the warm must cost at most three status writes (the first, one of
// progress, the result).
func testOneNodeWarm(t *testing.T, cp *testbed.ControlPlane) {
	cp.CreateNode(t, "iw-c1", map[string]string{"zone": "c"})
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "solo"}}
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name}}
	iw.Spec.NodeSelector = iwZone("c")
	for i := range 10 {
		iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(fmt.Sprintf("registry.example:5000/perf/ten%d:v1", i)))
	}
	if err := cp.Client.Create(t.Context(), iw); err != nil {
		t.Fatal(err)
	}
	w := e.watchFrom(t, iw.ResourceVersion)
	report := func(state warmv1.ImageState) {
		var imgs []warmv1.NodeImage
		for _, img := range iw.Spec.Images {
			imgs = append(imgs, iwImg(string(img), state))
		}
		e.putReport("iw-c1", []warmv1.WarmRef{{Namespace: e.key.Namespace, Name: e.key.Name, Generation: 1}}, imgs...)
	}

	w.next(t, "the first status", func(st warmv1.ImageWarmStatus) bool { return st.Nodes.NotReporting == 1 })
	report(warmv1.ImagePulling)
	progressAt := w.next(t, "the progress write", func(st warmv1.ImageWarmStatus) bool { return st.Nodes.Pulling == 1 })
	report(warmv1.ImagePresent)
	reportedAt := time.Now()
	readyAt := w.next(t, "Ready", func(st warmv1.ImageWarmStatus) bool {
		return meta.IsStatusConditionTrue(st.Conditions, warmv1.ConditionReady)
	})
	t.Logf("Ready %v after the last report, %v after the progress write", readyAt.Sub(reportedAt).Round(time.Millisecond),
		readyAt.Sub(progressAt).Round(time.Millisecond))
	// Spaced like progress, Ready could not come before the interval
	// after the progress write; half of it leaves room for a busy machine.
	if d := readyAt.Sub(progressAt); d >= testWriteInterval/2 {
		t.Errorf("Ready written %v after the progress write: it waited for the %v interval", d, testWriteInterval)
	}
	time.Sleep(testWriteInterval + time.Second) // a write after the result would be counted
	if n := w.count(); n > 3 {
		t.Errorf("%d status writes for a one-node warm, want at most 3", n)
	}
}

// startImageWarmController runs a manager with only the status controller,
// stopped at cleanup before the control plane.
func startImageWarmController(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	startImageWarmControllerWatching(t, cp, nil)
}

// startImageWarmControllerWatching is startImageWarmController watching
// only the given workload kinds (nil: every kind).
func startImageWarmControllerWatching(t *testing.T, cp *testbed.ControlPlane, kinds []warmv1.WorkloadKind) {
	t.Helper()
	startReconciler(t, cp, &Reconciler{MinWriteInterval: testWriteInterval, WatchedKinds: kinds})
}

// startReconciler runs a manager with only r, caching the workload kinds
// r watches, stopped at cleanup before the control plane.
func startReconciler(t *testing.T, cp *testbed.ControlPlane, r *Reconciler) {
	t.Helper()
	startReconcilerReading(t, cp, r, nil)
}

// startReconcilerReading is startReconciler with r reading and writing
// through wrap's client around the manager's, when wrap is not nil.
func startReconcilerReading(t *testing.T, cp *testbed.ControlPlane, r *Reconciler, wrap func(client.Client) client.Client) {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: testbed.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Logger: failureLog(t), Cache: CacheOptions(r.WatchedKinds),
		// Other suites in this package register controllers too.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		r.Client = wrap(mgr.GetClient())
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testbed.RunManager(t, mgr)
}

// failureLog is a logger (verbosity 2) that keeps the manager's last lines
// and prints them if t fails: a status that never came is then told from
// a reconcile that failed or a write that kept waiting.
func failureLog(t *testing.T) logr.Logger {
	const keep = 80
	var (
		mu    sync.Mutex
		lines []string
	)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("the manager's last %d log lines:\n%s", len(lines), strings.Join(lines, "\n"))
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, time.Now().Format("15:04:05.000")+" "+prefix+" "+args)
		if len(lines) > keep {
			lines = lines[len(lines)-keep:]
		}
	}, funcr.Options{Verbosity: 2})
}

// iwEnv drives one ImageWarm and the reports on it.
type iwEnv struct {
	t   *testing.T
	cp  *testbed.ControlPlane
	key client.ObjectKey
}

func (e *iwEnv) get() *warmv1.ImageWarm {
	e.t.Helper()
	iw := &warmv1.ImageWarm{}
	if err := e.cp.Client.Get(context.Background(), e.key, iw); err != nil {
		e.t.Fatal(err)
	}
	return iw
}

func (e *iwEnv) update(change func(*warmv1.ImageWarm)) {
	e.t.Helper()
	iw := e.get()
	change(iw)
	if err := e.cp.Client.Update(context.Background(), iw); err != nil {
		e.t.Fatal(err)
	}
}

// putReport writes a node's NodeWarm as its agent would: created once, its
// status replaced.
func (e *iwEnv) putReport(node string, warms []warmv1.WarmRef, images ...warmv1.NodeImage) {
	e.t.Helper()
	ctx := context.Background()
	nw := &warmv1.NodeWarm{}
	err := e.cp.Client.Get(ctx, client.ObjectKey{Name: node}, nw)
	if apierrors.IsNotFound(err) {
		nw = &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node}}
		err = e.cp.Client.Create(ctx, nw)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	r := iwReport(node, warms, images...)
	nw.Status = r.Status
	for i := range nw.Status.Images {
		if nw.Status.Images[i].State != warmv1.ImagePresent {
			nw.Status.Images[i].LastTransitionTime = ptr.To(metav1.Now())
		}
	}
	if err := e.cp.Client.Status().Update(ctx, nw); err != nil {
		e.t.Fatal(err)
	}
}

func (e *iwEnv) setZone(node, z string) {
	e.t.Helper()
	n := &corev1.Node{}
	ctx := context.Background()
	if err := e.cp.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		e.t.Fatal(err)
	}
	n.Labels["zone"] = z
	if err := e.cp.Client.Update(ctx, n); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls the ImageWarm until check accepts its status.
func (e *iwEnv) waitFor(t *testing.T, check func(warmv1.ImageWarmStatus) error) {
	t.Helper()
	iwEventually(t, "status", func() error {
		iw := &warmv1.ImageWarm{}
		if err := e.cp.Client.Get(context.Background(), e.key, iw); err != nil {
			return err
		}
		return check(iw.Status)
	})
}

// startKubectlWait starts `kubectl wait --for=condition=Ready` on the
// ImageWarm and returns a function that fails the test unless it succeeds.
func (e *iwEnv) startKubectlWait(t *testing.T) func() {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Logf("no kubectl, not checking kubectl wait: %v", err)
		return func() {}
	}
	cmd := exec.Command(path, "--kubeconfig", e.cp.Kubeconfig, "wait", "--for=condition=Ready",
		"-n", e.key.Namespace, "imagewarm/"+e.key.Name, "--timeout=30s")
	out := make(chan error, 1)
	var buf []byte
	go func() {
		var err error
		buf, err = cmd.CombinedOutput()
		out <- err
	}()
	return func() {
		t.Helper()
		if err := <-out; err != nil {
			t.Errorf("kubectl wait: %v\n%s", err, buf)
		}
	}
}

// statusWrites counts the ImageWarm's modifications from a watch, and
// passes each on, stamped with the time it came, to next.
type statusWrites struct {
	n       chan int
	changes chan iwChange
}

// iwChange is one modification of the ImageWarm, as the watch delivered it.
type iwChange struct {
	at time.Time
	st warmv1.ImageWarmStatus
}

func (e *iwEnv) watch(t *testing.T) *statusWrites {
	t.Helper()
	return e.watchFrom(t, e.get().ResourceVersion)
}

// watchFrom watches the ImageWarm's modifications after resourceVersion rv.
func (e *iwEnv) watchFrom(t *testing.T, rv string) *statusWrites {
	t.Helper()
	wc, err := client.NewWithWatch(e.cp.Config, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &warmv1.ImageWarmList{}, client.InNamespace(e.key.Namespace),
		client.MatchingFields{"metadata.name": e.key.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		t.Fatal(err)
	}
	sw := &statusWrites{n: make(chan int, 1), changes: make(chan iwChange, 100)}
	sw.n <- 0
	go func() {
		for ev := range w.ResultChan() {
			iw, ok := ev.Object.(*warmv1.ImageWarm)
			if ev.Type != watch.Modified || !ok {
				continue
			}
			at := time.Now()
			sw.n <- <-sw.n + 1
			select {
			case sw.changes <- iwChange{at: at, st: iw.Status}:
			default: // nobody reads them
			}
		}
	}()
	t.Cleanup(w.Stop)
	return sw
}

// next waits for the first modification whose status satisfies ok and
// returns when it came.
func (w *statusWrites) next(t *testing.T, what string, ok func(warmv1.ImageWarmStatus) bool) time.Time {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case c := <-w.changes:
			if ok(c.st) {
				return c.at
			}
		case <-timeout:
			t.Fatalf("%s: not written within 30s", what)
		}
	}
}

func (w *statusWrites) count() int {
	n := <-w.n
	w.n <- n
	return n
}

func iwEventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 30s", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func iwAll(errs ...error) error { return errors.Join(errs...) }

func iwCounts(st warmv1.ImageWarmStatus, want warmv1.NodeCounts) error {
	if st.Nodes != want {
		return fmt.Errorf("nodes %+v, want %+v", st.Nodes, want)
	}
	return nil
}

func iwGeneration(st warmv1.ImageWarmStatus, want int64) error {
	if st.ObservedGeneration != want {
		return fmt.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, want)
	}
	return nil
}

func iwReadyImages(st warmv1.ImageWarmStatus, want int32) error {
	if st.ReadyImages != want {
		return fmt.Errorf("%d images ready on every node, want %d", st.ReadyImages, want)
	}
	return nil
}

// iwPending checks the images listed as not done.
func iwPending(st warmv1.ImageWarmStatus, want ...warmv1.ImageFleetStatus) error {
	if !slices.Equal(st.Images, want) {
		return fmt.Errorf("images %+v, want %+v", st.Images, want)
	}
	return nil
}

func iwCond(st warmv1.ImageWarmStatus, typ string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != st.ObservedGeneration {
		return fmt.Errorf("%s is %+v, want %s/%s", typ, c, status, reason)
	}
	return nil
}

// iwNodeSeries counts the warmer_imagewarm_nodes series of ImageWarms named
// name.
func iwNodeSeries(t *testing.T, name string) int {
	t.Helper()
	n := 0
	iwEachSeries(t, "warmer_imagewarm_nodes", "imagewarm", name, func(float64) { n++ })
	return n
}

// iwMetricValue sums the series of a counter or gauge whose label has value.
func iwMetricValue(t *testing.T, metric, label, value string) float64 {
	t.Helper()
	sum := 0.0
	iwEachSeries(t, metric, label, value, func(v float64) { sum += v })
	return sum
}

func iwEachSeries(t *testing.T, metric, label, value string, f func(float64)) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != metric {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					f(m.GetCounter().GetValue() + m.GetGauge().GetValue())
				}
			}
		}
	}
}
