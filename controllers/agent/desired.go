package agent

import (
	"cmp"
	"slices"
	"sort"
	"strings"
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
	return (&parseMemo{}).desiredImages(nodeLabels, warms)
}

// parseMemo keeps each ImageWarm's selector and image references parsed,
// per generation: the spec of most ImageWarms does not change from one
// pass to the next, and parsing references is most of a pass's work
// (BenchmarkDesired1000). It is used by one reconciler at a time.
type parseMemo struct {
	warms map[types.NamespacedName]*parsedWarm
	pass  uint64
}

// parsedWarm is one ImageWarm generation's spec, parsed.
type parsedWarm struct {
	uid        types.UID
	generation int64
	selector   labels.Selector
	selErr     error
	parsedRefs bool          // images and invalid are filled in
	images     []parsedImage // distinct by normalised reference, spec order
	invalid    []invalidImage
	usedIn     uint64 // the last pass that used it
}

// parsedImage is one spec entry with its normalised reference.
type parsedImage struct {
	ref   pullengine.Reference
	key   string
	image string
}

// desiredImages is the package function's work, reusing what earlier
// passes parsed, and forgetting ImageWarms this pass did not see.
func (m *parseMemo) desiredImages(nodeLabels map[string]string, warms []warmv1.ImageWarm) (desiredSet, []types.NamespacedName) {
	if m.warms == nil {
		m.warms = map[types.NamespacedName]*parsedWarm{}
	}
	m.pass++
	set := desiredSet{images: map[string]*wantedImage{}, objects: map[types.NamespacedName]*warmv1.ImageWarm{}}
	var badSelector []types.NamespacedName
	ls := labels.Set(nodeLabels)
	for i := range warms {
		iw := &warms[i]
		if iw.DeletionTimestamp != nil {
			continue
		}
		nn := types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}
		pw := m.parsed(nn, iw)
		if pw.selErr != nil {
			badSelector = append(badSelector, nn)
			continue
		}
		if !pw.selector.Matches(ls) {
			continue
		}
		set.warms = append(set.warms, warmv1.WarmRef{Namespace: iw.Namespace, Name: iw.Name, Generation: iw.Generation})
		set.objects[nn] = stub(iw)
		pw.parseRefs(nn, iw)
		set.add(iw, nn, pw)
	}
	for nn, pw := range m.warms {
		if pw.usedIn != m.pass {
			delete(m.warms, nn)
		}
	}
	set.sortLists()
	return set, badSelector
}

// parsed returns iw's parsed spec, parsing it when its generation (or the
// object, by UID) is new.
func (m *parseMemo) parsed(nn types.NamespacedName, iw *warmv1.ImageWarm) *parsedWarm {
	pw, ok := m.warms[nn]
	// Generation 0 means the server did not set one (tests build objects
	// by hand): such specs are parsed every time.
	if !ok || pw.uid != iw.UID || pw.generation != iw.Generation || iw.Generation == 0 {
		pw = parseWarm(iw)
		m.warms[nn] = pw
	}
	pw.usedIn = m.pass
	return pw
}

// parseWarm parses an ImageWarm's selector; its images are parsed when it
// first matches (parseRefs): on most nodes most ImageWarms do not.
func parseWarm(iw *warmv1.ImageWarm) *parsedWarm {
	pw := &parsedWarm{uid: iw.UID, generation: iw.Generation}
	pw.selector, pw.selErr = iw.Spec.NodeSelector.AsSelector()
	return pw
}

// parseRefs parses the ImageWarm's images once. Two spellings of one image
// in one ImageWarm count once.
func (pw *parsedWarm) parseRefs(nn types.NamespacedName, iw *warmv1.ImageWarm) {
	if pw.parsedRefs {
		return
	}
	pw.parsedRefs = true
	pw.images = make([]parsedImage, 0, len(iw.Spec.Images))
	seen := make(map[string]bool, len(iw.Spec.Images))
	for _, img := range iw.Spec.Images {
		ref, err := pullengine.ParseReference(string(img))
		if err != nil {
			pw.invalid = append(pw.invalid, invalidImage{image: string(img), warm: nn, err: err})
			continue
		}
		key := ref.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		pw.images = append(pw.images, parsedImage{ref: ref, key: key, image: string(img)})
	}
}

// add merges one matching ImageWarm's images into the set.
func (s *desiredSet) add(iw *warmv1.ImageWarm, nn types.NamespacedName, pw *parsedWarm) {
	s.invalid = append(s.invalid, pw.invalid...)
	for _, pi := range pw.images {
		w, ok := s.images[pi.key]
		if !ok {
			w = &wantedImage{ref: pi.ref, image: pi.image, suspended: true, priority: iw.Spec.Priority}
			s.images[pi.key] = w
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
		slices.SortFunc(w.warms, nnCompare)
	}
	slices.SortFunc(s.warms, func(a, b warmv1.WarmRef) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// nnCompare orders by namespace, then name, without building strings.
func nnCompare(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
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
