package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// agentState is what the agent remembers between passes. All of it can be
// lost (an agent restart): the next pass rebuilds it from the runtime and
// the API, at worst repeating an event.
type agentState struct {
	// present marks the wanted images seen present, to tell an eviction
	// from an image never pulled.
	present map[string]bool
	// refreshedAt is when an image under pullPolicy Always was last
	// pulled or first seen present.
	refreshedAt map[string]time.Time
	// wanters maps a wanted image to the ImageWarms that want it, for
	// events raised from the engine's goroutines.
	wanters map[string][]*warmv1.ImageWarm
	// images maps a wanted image to the spelling events should show.
	images map[string]string
	// nodeWarm is the node's NodeWarm as last read or written.
	nodeWarm *warmv1.NodeWarm
	// reported is the last NodeWarm status written.
	reported *warmv1.NodeWarmStatus
	// lastWrite is when it was written.
	lastWrite time.Time
	// states is each wanted image's state in the last pass.
	states map[string]warmv1.ImageState
	// failures counts failed pulls since an image was last present.
	failures map[string]int32
	// node is the Node, related to every event.
	node *corev1.Node
	// secretProblems remembers the problem last reported per secret, so
	// each is reported once.
	secretProblems map[types.NamespacedName]string
	// warming tallies, per ImageWarm, the pulls done for it since its
	// last Warmed event.
	warming map[types.NamespacedName]*warmProgress
}

func newAgentState() agentState {
	return agentState{
		present:     map[string]bool{},
		refreshedAt: map[string]time.Time{},
		wanters:     map[string][]*warmv1.ImageWarm{},
		images:      map[string]string{},
		failures:    map[string]int32{},

		secretProblems: map[types.NamespacedName]string{},
		warming:        map[types.NamespacedName]*warmProgress{},
	}
}

// noteProblemLocked records a secret's problem and says whether it is new.
func (s *agentState) noteProblemLocked(nn types.NamespacedName, err error) bool {
	if s.secretProblems[nn] == err.Error() {
		return false
	}
	s.secretProblems[nn] = err.Error()
	return true
}

// refreshDueLocked says whether a present image under pullPolicy Always
// (refresh > 0) is due to be pulled again. An image first seen now counts
// as refreshed now: after an agent restart it waits one interval.
func (s *agentState) refreshDueLocked(key string, refresh time.Duration, now time.Time) bool {
	if refresh <= 0 {
		return false
	}
	t, ok := s.refreshedAt[key]
	if !ok {
		s.refreshedAt[key] = now
		return false
	}
	return now.Sub(t) >= refresh
}

// setWantersLocked records who wants what, and forgets images nobody
// wants any more.
func (s *agentState) setWantersLocked(d desiredSet, node *corev1.Node) {
	s.node = node
	wanters := make(map[string][]*warmv1.ImageWarm, len(d.images))
	images := make(map[string]string, len(d.images))
	for key, w := range d.images {
		images[key] = w.image
		for _, nn := range w.warms {
			wanters[key] = append(wanters[key], d.objects[nn])
		}
	}
	s.wanters, s.images = wanters, images
	keepOnly(s.present, d.images)
	keepOnly(s.refreshedAt, d.images)
	keepOnly(s.failures, d.images)
}

// keepOnly deletes from m every key that want lacks.
func keepOnly[V any](m map[string]V, want map[string]*wantedImage) {
	for key := range m {
		if _, ok := want[key]; !ok {
			delete(m, key)
		}
	}
}

// noteEvictionLocked tracks presence and reports an image this agent saw
// present that is now gone: the kubelet's garbage collector, or someone
// with crictl, removed it. It will be pulled again in this pass.
func (a *NodeAgent) noteEvictionLocked(ctx context.Context, w *wantedImage, present bool) {
	key := w.ref.String()
	if present {
		a.st.present[key] = true
		delete(a.st.failures, key)
		return
	}
	if !a.st.present[key] {
		return
	}
	delete(a.st.present, key)
	delete(a.st.refreshedAt, key)
	evictionsTotal.Inc()
	a.eventLocked(ctx, key, corev1.EventTypeWarning, ReasonEvicted, ActionPull,
		"Image %q is no longer on the node; pulling it again", w.image)
}

// stub is a minimal copy of an ImageWarm, enough to be an event's subject.
func stub(iw *warmv1.ImageWarm) *warmv1.ImageWarm {
	return &warmv1.ImageWarm{
		TypeMeta: metav1.TypeMeta{APIVersion: warmv1.GroupVersion.String(), Kind: "ImageWarm"},
		ObjectMeta: metav1.ObjectMeta{Namespace: iw.Namespace, Name: iw.Name, UID: iw.UID,
			ResourceVersion: iw.ResourceVersion},
	}
}
