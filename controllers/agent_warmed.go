package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// Pull events are summed up per ImageWarm. The kubelet records Pulling and
// Pulled for every image of every Pod; a pre-warmer doing the same records
// two events per image per node, all on the one ImageWarm: 20,000 for ten
// images on 1,000 nodes, which the API server's fair queuing must absorb
// while every agent also writes its NodeWarm, and which bury the failures
// in `kubectl describe`. So each node records one Warmed event per
// ImageWarm when the last of its images arrives, and keeps per-image events
// for what needs a look: failures, back-offs, evictions and bad secrets.
// NodeAgent.PerImageEvents (--per-image-events) brings back the kubelet's
// per-image events.

// warmProgress is what was pulled for one ImageWarm since its last Warmed
// event.
type warmProgress struct {
	started time.Time
	pulled  int
	bytes   uint64
}

// startTallyLocked notes, for every ImageWarm that wants the image, when
// its warming began.
func (a *NodeAgent) startTallyLocked(key string, now time.Time) {
	for _, iw := range a.st.wanters[key] {
		nn := types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}
		if a.st.warming[nn] == nil {
			a.st.warming[nn] = &warmProgress{started: now}
		}
	}
}

// tallyPulledLocked counts a successful pull for every ImageWarm that
// wants the image.
func (a *NodeAgent) tallyPulledLocked(res pullengine.Result) {
	for _, iw := range a.st.wanters[res.Ref] {
		nn := types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}
		t := a.st.warming[nn]
		if t == nil {
			t = &warmProgress{started: res.Finished.Add(-res.Duration)}
			a.st.warming[nn] = t
		}
		t.pulled++
		t.bytes += res.Size
	}
}

// warmedEventsLocked records Warmed on each ImageWarm that pulled
// something and now has every image it wants on this node present, and
// forgets tallies of ImageWarms no longer matching.
func (a *NodeAgent) warmedEventsLocked(ctx context.Context, d desiredSet, states map[string]warmv1.ImageState) {
	if len(a.st.warming) == 0 {
		return
	}
	complete := make(map[types.NamespacedName]bool, len(a.st.warming))
	for nn := range a.st.warming {
		complete[nn] = true
	}
	for key, w := range d.images {
		for _, nn := range w.warms {
			if _, ok := complete[nn]; ok {
				complete[nn] = complete[nn] && states[key] == warmv1.ImagePresent
			}
		}
	}
	for nn, t := range a.st.warming {
		iw := d.objects[nn]
		switch {
		case iw == nil:
			delete(a.st.warming, nn) // deleted or no longer matching
		case complete[nn] && t.pulled > 0:
			a.eventOn(ctx, []*warmv1.ImageWarm{iw}, corev1.EventTypeNormal, ReasonWarmed, actionOn(ActionWarm, nn.String()),
				"Every image is present: pulled %d (%d bytes) in %v", t.pulled, t.bytes, time.Since(t.started).Truncate(time.Millisecond))
			delete(a.st.warming, nn)
		case complete[nn]:
			delete(a.st.warming, nn) // nothing pulled: nothing to say
		}
	}
}
