package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
	"github.com/warmer-dev/warmer/test/testbed"
)

// eventAgent is a NodeAgent wired only for events: the manager's real
// events.k8s.io recorder against a real API server, and the ImageWarms
// that want each image. The pull results it is fed stand in for the
// engine, which is not what these tests are about.
func eventAgent(t *testing.T, cp *testbed.ControlPlane, node *corev1.Node, warms ...warmv1.ImageWarm) *NodeAgent {
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
	runManager(t, mgr)
	a := &NodeAgent{Recorder: mgr.GetEventRecorder("warmer-agent"), NodeName: node.Name, st: newAgentState(), PerImageEvents: true}
	d, _ := desiredImages(node.Labels, warms)
	a.st.setWantersLocked(d, node)
	return a
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
		if e.Regarding.UID == iw.UID && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
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
	iw := testbed.NewWarm("default", "two", nil, imgA, imgB, long)
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	a := eventAgent(t, cp, node, *iw)
	now := time.Now()
	pulled := func(img string) pullengine.Result {
		return pullengine.Result{Image: img, Ref: img, Size: 1 << 20, Duration: time.Second, Finished: now}
	}

	t.Run("two images, two Pulled events", func(t *testing.T) {
		a.PullFinished(pulled(imgA))
		a.PullFinished(pulled(imgB))
		a.PullFinished(pulled(long))
		testbed.Eventually(t, 20*time.Second, "three Pulled events", func() error {
			return distinctNotes(eventsAbout(t, cp, iw, ReasonPulled), imgA, imgB, long)
		})
		for _, e := range eventsAbout(t, cp, iw, ReasonPulled) {
			if len(e.Action) > maxEventAction || !strings.HasPrefix(e.Action, ActionPull+" ") {
				t.Errorf("action %q: want %q and a subject, at most %d bytes", e.Action, ActionPull, maxEventAction)
			}
		}
	})

	t.Run("a repeat about the same image still folds into its series", func(t *testing.T) {
		a.PullFinished(pulled(imgA))
		testbed.Eventually(t, 20*time.Second, "series of the first image", func() error {
			evs := eventsAbout(t, cp, iw, ReasonPulled)
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
		for _, img := range []string{imgA, imgB} {
			a.PullFinished(pullengine.Result{Image: img, Ref: img, Class: pullengine.ClassRegistryUnavailable,
				Message: huge, Finished: now})
		}
		testbed.Eventually(t, 20*time.Second, "two Failed events", func() error {
			evs := eventsAbout(t, cp, iw, ReasonFailed)
			for _, e := range evs {
				if len(e.Note) > maxEventNote || !strings.Contains(e.Note, "…") || !strings.HasSuffix(e.Note, "(node ev-node)") ||
					!strings.Contains(e.Note, "RegistryUnavailable") {
					return fmt.Errorf("note of %d bytes not cut as expected: %.120q", len(e.Note), e.Note)
				}
			}
			return distinctNotes(evs, imgA, imgB)
		})
	})
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

// TestWarmedEvent checks, on a real API server, that by default a node
// records one Warmed event per ImageWarm once all its images are present,
// instead of two events per image.
func TestWarmedEvent(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	ctx := context.Background()
	node := cp.CreateNode(t, "warmed-node", nil)
	imgA, imgB := "registry.example:5000/team/a:v1", "registry.example:5000/team/b:v1"
	iw := testbed.NewWarm("default", "pair", nil, imgA, imgB)
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	a := eventAgent(t, cp, node, *iw)
	a.PerImageEvents = false
	d, _ := desiredImages(node.Labels, []warmv1.ImageWarm{*iw})
	now := time.Now()
	for _, img := range []string{imgA, imgB} {
		a.PullStarted(d.images[img].ref)
		a.PullFinished(pullengine.Result{Image: img, Ref: img, Size: 1 << 20, Duration: time.Second, Finished: now})
	}
	a.mu.Lock()
	a.warmedEventsLocked(ctx, d, map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImagePulling})
	a.mu.Unlock()
	time.Sleep(2 * time.Second) // the recorder sends asynchronously
	if evs := eventsAbout(t, cp, iw, ReasonWarmed); len(evs) != 0 {
		t.Fatalf("Warmed before every image is present: %v", evs[0].Note)
	}
	a.mu.Lock()
	a.warmedEventsLocked(ctx, d, map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImagePresent})
	a.warmedEventsLocked(ctx, d, map[string]warmv1.ImageState{imgA: warmv1.ImagePresent, imgB: warmv1.ImagePresent})
	a.mu.Unlock()
	testbed.Eventually(t, 20*time.Second, "one Warmed event", func() error {
		evs := eventsAbout(t, cp, iw, ReasonWarmed)
		if len(evs) != 1 || evs[0].Series != nil || !strings.Contains(evs[0].Note, "pulled 2 (2097152 bytes)") ||
			!strings.HasSuffix(evs[0].Note, "(node warmed-node)") {
			return fmt.Errorf("%d Warmed events: %+v", len(evs), evs)
		}
		return nil
	})
	for _, r := range []string{ReasonPulling, ReasonPulled} {
		if evs := eventsAbout(t, cp, iw, r); len(evs) != 0 {
			t.Errorf("%d %s events without PerImageEvents", len(evs), r)
		}
	}
}
