package plan

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// DefaultRefreshInterval is how often pullPolicy Always pulls a present
// image again when the ImageWarm sets no refreshInterval.
const DefaultRefreshInterval = time.Hour

// wantedImage is one distinct image (by normalised reference) that the
// ImageWarms matching this node ask for with one set of credentials
// (scope), with their wishes merged: an entry of the desired set.
//
// Credentials decide the entries. A namespace whose ImageWarms name pull
// secrets for an image has an entry of its own, pulled and verified with
// its secrets alone; its policy, refresh, priority, timeout, rollout and
// retention apply to it alone. The ImageWarms that name no secret for it,
// whatever their namespace, share one entry pulled with node-wide
// credentials only (credential providers, anonymous): nobody's secrets
// are used there, so a public image many namespaces want is still one
// pull. An image on the node counts as present for an entry only once a
// pull under the entry's credentials succeeded (see planner.view), so no
// namespace learns of, or rides on, an image only another's credentials
// could fetch.
type wantedImage struct {
	// key is the entry's key: entryKey(refKey, scope).
	key string
	// refKey is the normalised reference, the engine's and runtime's key.
	refKey string
	// scope is the namespace whose pull secrets this entry uses; "" for
	// node-wide credentials.
	scope string
	// ref is the normalised reference.
	ref imageref.Reference
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
	// waiting is true when no ImageWarm that wants it, not suspended, has
	// admitted this node in its rollout yet: the image is not pulled.
	waiting bool
	// pin is true when an ImageWarm that wants it, suspended or not, has
	// retention Pinned: suspending stops pulls, not the pin.
	pin bool
	// warms are the ImageWarms that want it, sorted.
	warms []types.NamespacedName
	// secrets are the pull secrets the active ImageWarms name, by namespace.
	secrets []types.NamespacedName
	// named is set when some ImageWarm that wants it, suspended or not,
	// names a pull secret: the namespace's entry is then its own.
	named bool
	// artifact is set when some ImageWarm lists it in spec.artifacts: it
	// is pulled only where the runtime can mount artifacts (artifacts.go).
	artifact bool
}

// entryKey is the key of an image's entry for a scope: the reference
// alone for node-wide credentials, so that an image no ImageWarm names a
// secret for keeps the key it always had.
func entryKey(refKey, scope string) string {
	if scope == "" {
		return refKey
	}
	return refKey + " " + scope
}

// invalidImage is a spec entry that does not parse. The API server's
// validation should make these impossible; the agent still reports them
// rather than fail the node's whole pass.
type invalidImage struct {
	image string
	warm  types.NamespacedName
	err   error
}

// Desired is what this node must hold.
type Desired struct {
	images  map[string]*wantedImage // by normalised reference
	invalid []invalidImage
	warms   []warmv1.WarmRef
	// objects are stubs of the matching ImageWarms, events' subjects.
	objects map[types.NamespacedName]*warmv1.ImageWarm
	// holdTaint are the matching ImageWarms, not suspended, that ask for
	// the node's startup taint to stay until they are warm.
	holdTaint map[types.NamespacedName]bool
	// labelled are the matching ImageWarms that ask for their node label
	// (spec.nodeLabel), suspended or not: the label says what the node
	// holds, not what is being pulled.
	labelled map[types.NamespacedName]bool
}

// desiredImages computes the images the ImageWarms ask of the named node
// with the given labels. ImageWarms being deleted, and ones whose selector
// does not parse, are left out; the latter also go to badSelector.
func desiredImages(nodeName string, nodeLabels map[string]string, warms []warmv1.ImageWarm) (Desired, []types.NamespacedName) {
	return (&Memo{}).Desired(nodeName, nodeLabels, warms, nil)
}

// Memo keeps each ImageWarm's selector and image references parsed,
// per generation: the spec of most ImageWarms does not change from one
// pass to the next, and parsing references is most of a pass's work
// (BenchmarkDesired1000). It is used by one reconciler at a time.
type Memo struct {
	warms map[types.NamespacedName]*parsedWarm
	pass  uint64
}

// parsedWarm is one ImageWarm generation's spec, parsed.
type parsedWarm struct {
	uid        types.UID
	generation int64
	// resolved is the hash of status.resolved's images taken with the
	// spec, echoed in the NodeWarm; "" without imagesFrom.
	resolved   string
	selector   labels.Selector
	selErr     error
	parsedRefs bool          // images and invalid are filled in
	images     []parsedImage // distinct by normalised reference, spec order
	invalid    []invalidImage
	usedIn     uint64 // the last pass that used it
}

// parsedImage is one spec entry with its normalised reference.
type parsedImage struct {
	ref      imageref.Reference
	key      string
	image    string
	artifact bool
}

// Bounds are RolloutBounds by name, which is their ImageWarm's.
type Bounds map[types.NamespacedName]*warmv1.RolloutBound

// Desired computes the images the ImageWarms ask of the named node with
// the given labels, reusing what earlier passes parsed and forgetting
// ImageWarms this pass did not see. ImageWarms being deleted, and ones
// whose selector does not parse, are left out; the latter are returned.
// bounds are the RolloutBounds by name: with spec.rollout, the higher of an
// ImageWarm's status.rollout and its RolloutBound admits the node.
func (m *Memo) Desired(nodeName string, nodeLabels map[string]string, warms []warmv1.ImageWarm, bounds Bounds) (Desired, []types.NamespacedName) {
	if m.warms == nil {
		m.warms = map[types.NamespacedName]*parsedWarm{}
	}
	m.pass++
	set := Desired{images: map[string]*wantedImage{}, objects: map[types.NamespacedName]*warmv1.ImageWarm{},
		holdTaint: map[types.NamespacedName]bool{}, labelled: map[types.NamespacedName]bool{}}
	byNamespace := map[string]*wantedImage{}
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
		set.warms = append(set.warms, warmv1.WarmRef{Namespace: iw.Namespace, Name: iw.Name, Generation: iw.Generation, Resolved: pw.resolved})
		set.objects[nn] = stub(iw)
		if iw.Spec.StartupTaint && !iw.Spec.Suspend {
			set.holdTaint[nn] = true
		}
		if iw.Spec.NodeLabel {
			set.labelled[nn] = true
		}
		pw.parseRefs(nn, iw)
		// Read each pass: the rollout's bound is status, and a
		// RolloutBound, which move without a new generation.
		set.add(byNamespace, iw, nn, pw, warmv1.RolloutAdmits(iw, bounds[nn], nodeName))
	}
	set.scope(byNamespace)
	for nn, pw := range m.warms {
		if pw.usedIn != m.pass {
			delete(m.warms, nn)
		}
	}
	set.sortLists()
	return set, badSelector
}

// parsed returns iw's parsed spec, parsing it when its generation, its
// resolved images (by hash) or the object (by UID) is new.
func (m *Memo) parsed(nn types.NamespacedName, iw *warmv1.ImageWarm) *parsedWarm {
	pw, ok := m.warms[nn]
	// Generation 0 means the server did not set one (tests build objects
	// by hand): such specs are parsed every time.
	if !ok || pw.uid != iw.UID || pw.generation != iw.Generation || pw.resolved != iw.ResolvedHash() || iw.Generation == 0 {
		pw = parseWarm(iw)
		m.warms[nn] = pw
	}
	pw.usedIn = m.pass
	return pw
}

// parseWarm parses an ImageWarm's selector; its images are parsed when it
// first matches (parseRefs): on most nodes most ImageWarms do not.
func parseWarm(iw *warmv1.ImageWarm) *parsedWarm {
	pw := &parsedWarm{uid: iw.UID, generation: iw.Generation, resolved: iw.ResolvedHash()}
	pw.selector, pw.selErr = iw.Spec.NodeSelector.AsNodeSelector()
	return pw
}

// parseRefs parses the ImageWarm's images once: spec.images, then the
// images the controller resolved from workloads (imagesFrom), taken as if
// the spec listed them, then spec.artifacts. Two spellings of one image in
// one ImageWarm count once, as an artifact if either is one.
func (pw *parsedWarm) parseRefs(nn types.NamespacedName, iw *warmv1.ImageWarm) {
	if pw.parsedRefs {
		return
	}
	pw.parsedRefs = true
	resolved := iw.ResolvedImages()
	pw.images = make([]parsedImage, 0, len(iw.Spec.Images)+len(resolved)+len(iw.Spec.Artifacts))
	seen := make(map[string]int, cap(pw.images))
	add := func(img string, artifact bool) {
		ref, err := imageref.Parse(img)
		if err != nil {
			pw.invalid = append(pw.invalid, invalidImage{image: img, warm: nn, err: err})
			return
		}
		key := ref.String()
		if i, ok := seen[key]; ok {
			pw.images[i].artifact = pw.images[i].artifact || artifact
			return
		}
		seen[key] = len(pw.images)
		pw.images = append(pw.images, parsedImage{ref: ref, key: key, image: img, artifact: artifact})
	}
	for _, img := range iw.Spec.Images {
		add(string(img), false)
	}
	for _, img := range resolved {
		add(img, false)
	}
	for _, img := range iw.Spec.Artifacts {
		add(string(img), true)
	}
}

// add merges one matching ImageWarm's images into its namespace's wishes,
// byNamespace (keyed by entryKey(reference, namespace)); admitted says
// whether its rollout lets this node pull.
func (s *Desired) add(byNamespace map[string]*wantedImage, iw *warmv1.ImageWarm, nn types.NamespacedName, pw *parsedWarm, admitted bool) {
	s.invalid = append(s.invalid, pw.invalid...)
	for _, pi := range pw.images {
		k := entryKey(pi.key, iw.Namespace)
		w, ok := byNamespace[k]
		if !ok {
			w = &wantedImage{key: k, refKey: pi.key, scope: iw.Namespace, ref: pi.ref, image: pi.image,
				suspended: true, waiting: true, priority: iw.Spec.Priority}
			byNamespace[k] = w
		}
		w.artifact = w.artifact || pi.artifact
		w.merge(iw, nn, admitted)
	}
}

// scope turns each namespace's wishes into the set's entries: a
// namespace that names pull secrets for an image keeps its wish as an
// entry of its own; the others are folded into the image's node-wide
// entry, in namespace order.
func (s *Desired) scope(byNamespace map[string]*wantedImage) {
	keys := make([]string, 0, len(byNamespace))
	for k := range byNamespace {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := byNamespace[k]
		if w.named {
			s.images[k] = w
			continue
		}
		shared, ok := s.images[w.refKey]
		if !ok {
			w.key, w.scope = w.refKey, ""
			s.images[w.refKey] = w
			continue
		}
		shared.fold(w)
	}
}

// fold merges another wish into w: one ImageWarm's (merge), or another
// namespace's node-wide one (scope). A suspended wish only counts as
// wanting the image and pinning it; of the others, one that admitted the
// node is enough for a pull, and the highest priority, shortest timeout
// and shortest refresh apply.
func (w *wantedImage) fold(o *wantedImage) {
	w.warms = append(w.warms, o.warms...)
	w.pin = w.pin || o.pin
	w.artifact = w.artifact || o.artifact
	if o.suspended {
		return
	}
	w.waiting = w.waiting && o.waiting
	if w.suspended || o.priority > w.priority {
		w.priority = o.priority
	}
	w.suspended = false
	if o.timeout > 0 && (w.timeout == 0 || o.timeout < w.timeout) {
		w.timeout = o.timeout
	}
	if o.refresh > 0 && (w.refresh == 0 || o.refresh < w.refresh) {
		w.refresh = o.refresh
	}
}

// merge folds one ImageWarm's wishes into w, by the rules of fold: a
// suspended ImageWarm only counts as wanting the image (and pinning it).
// Its secrets are kept apart from fold, which merges across namespaces.
func (w *wantedImage) merge(iw *warmv1.ImageWarm, nn types.NamespacedName, admitted bool) {
	w.named = w.named || len(iw.Spec.ImagePullSecrets) > 0
	w.warms = append(w.warms, nn)
	o := wishOf(iw, admitted)
	w.fold(&o)
	if !iw.Spec.Suspend {
		for _, s := range iw.Spec.ImagePullSecrets {
			w.secrets = append(w.secrets, types.NamespacedName{Namespace: iw.Namespace, Name: s.Name})
		}
	}
}

// wishOf is one ImageWarm's wishes for an image, as an entry of its own
// (its name aside).
func wishOf(iw *warmv1.ImageWarm, admitted bool) wantedImage {
	o := wantedImage{pin: iw.Spec.Retention == warmv1.RetentionPinned,
		suspended: iw.Spec.Suspend, waiting: !admitted, priority: iw.Spec.Priority}
	if t := iw.Spec.PullTimeout; t != nil && t.Duration > 0 {
		o.timeout = t.Duration
	}
	if iw.Spec.PullPolicy == warmv1.PullAlways {
		o.refresh = DefaultRefreshInterval
		if iw.Spec.RefreshInterval != nil && iw.Spec.RefreshInterval.Duration > 0 {
			o.refresh = iw.Spec.RefreshInterval.Duration
		}
	}
	return o
}

func (s *Desired) sortLists() {
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

// Keys returns the set's entry keys in order: each image's node-wide
// entry, then its namespaces' entries.
func (s *Desired) Keys() []string {
	keys := make([]string, 0, len(s.images))
	for k := range s.images {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Refs returns the set's distinct normalised references in order: what
// the engine and the runtime are asked about.
func (s *Desired) Refs() []string {
	seen := make(map[string]bool, len(s.images))
	refs := make([]string, 0, len(s.images))
	for _, w := range s.images {
		if !seen[w.refKey] {
			seen[w.refKey] = true
			refs = append(refs, w.refKey)
		}
	}
	sort.Strings(refs)
	return refs
}
