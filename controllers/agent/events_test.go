package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warmer-dev/warmer/pkg/pullengine/pull"

	"github.com/warmer-dev/warmer/controllers/agent/plan"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// eventAgent is a NodeAgent wired only for events: the manager's real
// events.k8s.io recorder against a real API server. The events it is
// given stand in for the planner's, which is not what these tests are
// about.
func eventAgent(t *testing.T, cp *testbed.ControlPlane, node *corev1.Node) *NodeAgent {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 testbed.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	testbed.RunManager(t, mgr)
	return &NodeAgent{Recorder: mgr.GetEventRecorder("warmer-agent"), NodeName: node.Name}
}

// eventsAbout lists the events with reason on the ImageWarm.
func eventsAbout(t *testing.T, cp *testbed.ControlPlane, iw *warmv1.ImageWarm, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := cp.Client.List(context.Background(), &list, client.InNamespace(iw.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == iw.UID && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

// wanted is the desired set of a node with the given ImageWarms, read
// again from the API server (each with its current resourceVersion, as
// the agent's cache would give them).
func wanted(t *testing.T, cp *testbed.ControlPlane, node *corev1.Node, warms ...*warmv1.ImageWarm) plan.Desired {
	t.Helper()
	var items []warmv1.ImageWarm
	for _, iw := range warms {
		var cur warmv1.ImageWarm
		if err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(iw), &cur); err != nil {
			t.Fatal(err)
		}
		items = append(items, cur)
	}
	d, _ := (&plan.Memo{}).Desired("", node.Labels, items, nil)
	return d
}

// planned is the planner's events for one pass over d that takes in
// results, with per-image events on; images in back-off are those the
// engine reports so. The events are the planner's own, with their
// subjects, as the shell is given them.
func planned(d plan.Desired, backOff []string, results ...pullengine.Result) []plan.Event {
	now := time.Now()
	engine := map[string]pullengine.Status{}
	for _, img := range backOff {
		engine[img] = pullengine.Status{Image: img, Ref: img, State: pull.StateBackOff, RetryAt: now.Add(time.Minute)}
	}
	for i := range results {
		results[i].Finished = now
	}
	out := plan.Decide(plan.Input{Now: now, ListedAt: now, Desired: d, Runtime: pullengine.NewPresence(nil), Disk: pullengine.DiskUsage{Known: true},
		Engine: engine, Results: results, PerImageEvents: true, Resync: time.Minute})
	return out.Events
}

// TestEventsPerImage checks, on a real API server, that events about two
// images of one ImageWarm from one node stay two events with their own
// notes. client-go's recorder keys its series on regarding, related,
// action and reason but not the note: with one action for all images the
// second image's Pulled event only bumped the first one's count.
func TestEventsPerImage(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	ctx := context.Background()
	node := cp.CreateNode(t, "ev-node", nil)
	imgA, imgB := "registry.example:5000/team/a:v1", "registry.example:5000/team/b:v1"
	long := "registry.example:5000/" + strings.Repeat("long-name/", 20) + "c:v1" // action would pass 128 bytes
	iw := build.ImageWarm("default", "two", build.Images(imgA, imgB, long))
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	a := eventAgent(t, cp, node)
	d := wanted(t, cp, node, iw)
	pulled := func(imgs ...string) []plan.Event {
		var res []pullengine.Result
		for _, img := range imgs {
			res = append(res, pullengine.Result{Image: img, Ref: img, Size: 1 << 20, Duration: time.Second, Attempts: 1})
		}
		return onlyReason(planned(d, nil, res...), warmv1.ReasonPulled)
	}

	t.Run("two images, two Pulled events", func(t *testing.T) {
		a.record(ctx, node, pulled(imgA, imgB, long))
		testbed.Eventually(t, 20*time.Second, "three Pulled events", func() error {
			return distinctNotes(eventsAbout(t, cp, iw, warmv1.ReasonPulled), imgA, imgB, long)
		})
		for _, e := range eventsAbout(t, cp, iw, warmv1.ReasonPulled) {
			if len(e.Action) > plan.MaxEventAction || !strings.HasPrefix(e.Action, plan.ActionPull+" ") {
				t.Errorf("action %q: want %q and a subject, at most %d bytes", e.Action, plan.ActionPull, plan.MaxEventAction)
			}
		}
	})

	t.Run("a repeat about the same image still folds into its series", func(t *testing.T) {
		a.record(ctx, node, pulled(imgA))
		testbed.Eventually(t, 20*time.Second, "series of the first image", func() error {
			evs := eventsAbout(t, cp, iw, warmv1.ReasonPulled)
			if len(evs) != 3 {
				return fmt.Errorf("%d Pulled events, want still 3", len(evs))
			}
			for _, e := range evs {
				if strings.Contains(e.Note, imgA) && (e.Series == nil || e.Series.Count != 2) {
					return fmt.Errorf("series of %s: %+v", imgA, e.Series)
				}
			}
			return nil
		})
	})

	t.Run("huge runtime messages are cut, not refused", func(t *testing.T) {
		huge := strings.Repeat("é registry said no ", 2000) // about 40 KB
		var res []pullengine.Result
		for _, img := range []string{imgA, imgB} {
			res = append(res, pullengine.Result{Image: img, Ref: img, Class: pull.ClassRegistryUnavailable, Message: huge})
		}
		a.record(ctx, node, onlyReason(planned(d, nil, res...), warmv1.ReasonFailed))
		testbed.Eventually(t, 20*time.Second, "two Failed events", func() error {
			evs := eventsAbout(t, cp, iw, warmv1.ReasonFailed)
			for _, e := range evs {
				if len(e.Note) > plan.MaxEventNote || !strings.Contains(e.Note, "…") || !strings.HasSuffix(e.Note, "(node ev-node)") ||
					!strings.Contains(e.Note, "RegistryUnavailable") {
					return fmt.Errorf("note of %d bytes not cut as expected: %.120q", len(e.Note), e.Note)
				}
			}
			return distinctNotes(evs, imgA, imgB)
		})
	})
}

// TestEventsFold checks, on a real API server, that a failing image's
// events fold into at most two Event objects per node (Failed and BackOff)
// whose counts rise, although the ImageWarm's status and the Node change
// between the retries, as they do in a cluster: the controller writes the
// ImageWarm's status, the kubelet the Node's. References carrying the
// objects' resourceVersions made every retry a new Event object.
func TestEventsFold(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	ctx := context.Background()
	node := cp.CreateNode(t, "fold-node", nil)
	img := "registry.example:5000/team/missing:v1"
	iw := build.ImageWarm("default", "failing", build.Images(img))
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	a := eventAgent(t, cp, node)
	const retries = 4
	for i := range retries {
		d := wanted(t, cp, node, iw)
		res := pullengine.Result{Image: img, Ref: img, Class: pull.ClassNotFound, Message: fmt.Sprintf("not found (try %d)", i)}
		evs := planned(d, []string{img}, res)
		if len(evs) != 2 || evs[0].Reason != warmv1.ReasonFailed || evs[1].Reason != warmv1.ReasonBackOff {
			t.Fatalf("the planner's events %+v, want Failed and BackOff", evs)
		}
		a.record(ctx, node, evs)
		touch(t, cp, iw, node, i)
	}
	testbed.Eventually(t, 30*time.Second, "two event series", func() error {
		evs := eventsAbout(t, cp, iw, "")
		if len(evs) != 2 {
			return fmt.Errorf("%d Event objects, want 2 (Failed and BackOff)", len(evs))
		}
		for _, e := range evs {
			// The recorder sends the series' first repeat at once and
			// later counts on its half-hourly heartbeat.
			if e.Series == nil || e.Series.Count < 2 {
				return fmt.Errorf("%s: series %+v, want a count that rose", e.Reason, e.Series)
			}
		}
		return nil
	})
}

// touch changes the ImageWarm's status and the Node's labels, as the
// controller and the kubelet would between two retries.
func touch(t *testing.T, cp *testbed.ControlPlane, iw *warmv1.ImageWarm, node *corev1.Node, i int) {
	t.Helper()
	ctx := context.Background()
	var cur warmv1.ImageWarm
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(iw), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.ObservedGeneration = int64(i + 1)
	if err := cp.Client.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels["heartbeat"] = fmt.Sprint(i)
	if err := cp.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
}

// distinctNotes checks that there is exactly one event per image, each
// naming its own image.
func distinctNotes(evs []eventsv1.Event, images ...string) error {
	if len(evs) != len(images) {
		notes := make([]string, len(evs))
		for i, e := range evs {
			notes[i] = e.Note
		}
		return fmt.Errorf("%d events, want %d: %q", len(evs), len(images), notes)
	}
	for _, img := range images {
		n := 0
		for _, e := range evs {
			if strings.Contains(e.Note, fmt.Sprintf("%q", img)) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d events name %s, want 1", n, img)
		}
	}
	return nil
}

// onlyReason keeps the events with reason.
func onlyReason(evs []plan.Event, reason string) []plan.Event {
	var out []plan.Event
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
