package controllers

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// DefaultRefreshInterval is how often pullPolicy Always pulls a present
// image again when the ImageWarm sets no refreshInterval.
const DefaultRefreshInterval = time.Hour

// wantedImage is one distinct image (by normalised reference) that the
// ImageWarms matching this node ask for, with their wishes merged.
type wantedImage struct {
	// ref is the normalised reference; the key everywhere.
	ref pullengine.Reference
	// image is the reference as the first ImageWarm wrote it, for events.
	image string
	// priority is the highest priority among the active ImageWarms.
	priority int32
	// timeout is the shortest pullTimeout set among them; 0 for the default.
	timeout time.Duration
	// refresh is the shortest refresh interval among those with pullPolicy
	// Always; 0 when none asks for Always.
	refresh time.Duration
	// suspended is true when every ImageWarm that wants it is suspended.
	suspended bool
	// warms are the ImageWarms that want it, sorted.
	warms []types.NamespacedName
	// secrets are the pull secrets the active ImageWarms name, by namespace.
	secrets []types.NamespacedName
}

// invalidImage is a spec entry that does not parse. The API server's
// validation should make these impossible; the agent still reports them
// rather than fail the node's whole pass.
type invalidImage struct {
	image string
	warm  types.NamespacedName
	err   error
}

// desiredSet is what this node must hold.
type desiredSet struct {
	images  map[string]*wantedImage // by normalised reference
	invalid []invalidImage
	warms   []warmv1.WarmRef
	// objects are stubs of the matching ImageWarms, events' subjects.
	objects map[types.NamespacedName]*warmv1.ImageWarm
}

// desiredImages computes the images the ImageWarms ask of a node with the
// given labels. ImageWarms being deleted, and ones whose selector does not
// parse, are left out; the latter also go to badSelector.
func desiredImages(nodeLabels map[string]string, warms []warmv1.ImageWarm) (desiredSet, []types.NamespacedName) {
	set := desiredSet{images: map[string]*wantedImage{}, objects: map[types.NamespacedName]*warmv1.ImageWarm{}}
	var badSelector []types.NamespacedName
	ls := labels.Set(nodeLabels)
	for i := range warms {
		iw := &warms[i]
		if iw.DeletionTimestamp != nil {
			continue
		}
		sel, err := iw.Spec.NodeSelector.AsSelector()
		if err != nil {
			badSelector = append(badSelector, types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name})
			continue
		}
		if !sel.Matches(ls) {
			continue
		}
		set.warms = append(set.warms, warmv1.WarmRef{Namespace: iw.Namespace, Name: iw.Name, Generation: iw.Generation})
		set.objects[types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}] = stub(iw)
		set.add(iw)
	}
	set.sortLists()
	return set, badSelector
}

// add merges one matching ImageWarm's images into the set.
func (s *desiredSet) add(iw *warmv1.ImageWarm) {
	nn := types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}
	seen := make(map[string]bool, len(iw.Spec.Images))
	for _, img := range iw.Spec.Images {
		ref, err := pullengine.ParseReference(string(img))
		if err != nil {
			s.invalid = append(s.invalid, invalidImage{image: string(img), warm: nn, err: err})
			continue
		}
		key := ref.String()
		if seen[key] { // two spellings of one image in one ImageWarm
			continue
		}
		seen[key] = true
		w, ok := s.images[key]
		if !ok {
			w = &wantedImage{ref: ref, image: string(img), suspended: true, priority: iw.Spec.Priority}
			s.images[key] = w
		}
		w.merge(iw, nn)
	}
}

// merge folds one ImageWarm's wishes into w. Suspended ImageWarms only
// count as wanting the image; their priority, timeout, policy and secrets
// do not apply.
func (w *wantedImage) merge(iw *warmv1.ImageWarm, nn types.NamespacedName) {
	w.warms = append(w.warms, nn)
	if iw.Spec.Suspend {
		return
	}
	if w.suspended || iw.Spec.Priority > w.priority {
		w.priority = iw.Spec.Priority
	}
	w.suspended = false
	if t := iw.Spec.PullTimeout; t != nil && t.Duration > 0 && (w.timeout == 0 || t.Duration < w.timeout) {
		w.timeout = t.Duration
	}
	if iw.Spec.PullPolicy == warmv1.PullAlways {
		r := DefaultRefreshInterval
		if iw.Spec.RefreshInterval != nil && iw.Spec.RefreshInterval.Duration > 0 {
			r = iw.Spec.RefreshInterval.Duration
		}
		if w.refresh == 0 || r < w.refresh {
			w.refresh = r
		}
	}
	for _, s := range iw.Spec.ImagePullSecrets {
		w.secrets = append(w.secrets, types.NamespacedName{Namespace: iw.Namespace, Name: s.Name})
	}
}

func (s *desiredSet) sortLists() {
	for _, w := range s.images {
		sort.Slice(w.warms, func(i, j int) bool { return w.warms[i].String() < w.warms[j].String() })
	}
	sort.Slice(s.warms, func(i, j int) bool {
		if s.warms[i].Namespace != s.warms[j].Namespace {
			return s.warms[i].Namespace < s.warms[j].Namespace
		}
		return s.warms[i].Name < s.warms[j].Name
	})
}

// sortedKeys returns the set's normalised references in order.
func (s *desiredSet) sortedKeys() []string {
	keys := make([]string, 0, len(s.images))
	for k := range s.images {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
