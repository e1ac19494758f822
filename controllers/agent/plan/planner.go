package plan

import (
	"maps"
	"math"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// Decide is the pass: it takes the Input the shell gathered and returns
// the Output the shell applies.

// Input is what one pass decides from.
type Input struct {
	// Now is the pass's time, on the same clock as the engine's results.
	Now time.Time
	// ListedAt is when the runtime's images were listed: a pull that
	// succeeded after it is present, only not listed yet.
	ListedAt time.Time
	// Desired is what the ImageWarms matching the node ask for.
	Desired Desired
	// Runtime is the runtime's images, listed once at ListedAt.
	Runtime ImageLookup
	// Engine is the engine's view of each wanted image (by normalised
	// reference), taken after the runtime was listed; an image it knows
	// nothing of is absent.
	Engine map[string]pull.Status
	// Started and Results are the pulls that started and finished since
	// the last pass, in the order the engine reported them.
	Started []StartedPull
	Results []pull.Result
	// Disk is the image filesystem's level.
	Disk pull.DiskUsage
	// Conditions are the NodeWarm's conditions as last reported.
	Conditions []metav1.Condition
	// RuntimeInfo names the container runtime, for the status.
	RuntimeInfo warmv1.RuntimeInfo
	// CredentialProviders names the credential-provider plugins in use.
	CredentialProviders []string
	// CredentialKey is the agent's public credential key, for the status.
	CredentialKey *warmv1.CredentialKey
	// Resync bounds the time to the next pass.
	Resync time.Duration
	// PerImageEvents asks for the kubelet's per-image events (Pulling,
	// Pulled, Failed, BackOff) instead of the summed-up Warmed and Failed.
	PerImageEvents bool
	// Taint is the node's startup taint (startuptaint.go).
	Taint TaintInput
	// Pins is the runtime's pinning, as the shell found it.
	Pins PinView
	// Marks are the runtime's marks of images pulled with pull secrets
	// (marks.go).
	Marks MarkView
	// ContentUnable says why the engine cannot see the bytes of pulls
	// (no content store); empty when it can.
	ContentUnable string
	// Yield says whether the engine yields to the runtime's pulls for
	// others.
	Yield pull.Yield
	// ServedStarts counts the containers started in the last day from
	// images the agent had warmed (the shell's served.go).
	ServedStarts int
	// ServedByImage counts them by the normalised reference the agent
	// pulled their image by; read only.
	ServedByImage map[string]int
	// EvictionBackOff spaces the pulls of an image the node keeps
	// removing.
	EvictionBackOff BackOff
	// Verification is which images count as present without a pull
	// under the entry's own credentials (verification.go).
	Verification Verification
	// State is what the previous pass remembered.
	State State
}

// ImageLookup finds a reference among the runtime's images.
type ImageLookup interface {
	Lookup(ref imageref.Reference) (pull.PresentImage, bool)
}

// StartedPull is a pull the engine started: the image's normalised
// reference, and when.
type StartedPull struct {
	Key string
	// Tag is the pull's credentials scope (Pull.Scope).
	Tag string
	At  time.Time
}

// Output is what one pass does.
type Output struct {
	// Pulls is every image that should be pulling now; the engine cancels
	// the rest.
	Pulls []Pull
	// Status is the NodeWarm status to report.
	Status warmv1.NodeWarmStatus
	// Events to record, in order.
	Events []Event
	// Evictions counts wanted images that disappeared from the node.
	Evictions int
	// Next is when the next pass is due.
	Next time.Duration
	// Pins and Unpins are the image names to pin and unpin, in order.
	Pins, Unpins []string
	// Marks are the image names to mark as pulled with pull secrets.
	Marks []string
	// State is what the next pass needs to remember.
	State State
	// RemoveTaint asks the shell to remove the node's startup taint.
	RemoveTaint bool
	// NodeLabels are the warm labels' keys the node should carry, sorted
	// (nodesignal.go); the shell removes the others under the warm domain.
	NodeLabels []string
	// ImagesWarm is the Node's ImagesWarm condition as it should read.
	ImagesWarm NodeSignal

	// pass is what Applied needs of the pass that made this plan.
	pass applyContext
}

// Pull is one image to pull, with the secrets to pull it with. The shell
// turns it into the engine's request, with the secrets' logins.
type Pull struct {
	// Image is the reference as the first ImageWarm wrote it.
	Image string
	// Priority, Timeout and MissingSince are the engine's request fields
	// of the same names.
	Priority     int32
	Timeout      time.Duration
	MissingSince time.Time
	// Secrets are the pull secrets to pull it with.
	Secrets []types.NamespacedName
	// Scope names the credentials: the namespace of Secrets, or "" for
	// node-wide ones. The shell gives it to the engine as the request's
	// Tag, and the engine's reports carry it back.
	Scope string
	// Share is the namespace whose turn in the engine's queue the pull
	// takes (fair.go, shareOut); the shell gives it as the request's
	// Share.
	Share string

	// refKey, and whether the entry's pull is under way or backing off,
	// for choosing one pull per image (onePullPerImage).
	refKey            string
	inFlight, backOff bool
	// namespaces want the entry (wantedImage.namespaces), for shareOut.
	namespaces []string
}

// State is what the agent remembers between passes. All of it can be
// lost (an agent restart): the next pass rebuilds it from the runtime and
// the engine, at worst missing an eviction or repeating an event.
type State struct {
	// images is each wanted image's memory, by normalised reference.
	images map[string]imageMemory
	// secrets is the problem last reported per pull secret, so each is
	// reported once.
	secrets map[types.NamespacedName]string
	// warming tallies, per ImageWarm, the pulls done for it since its
	// last Warmed event.
	warming map[types.NamespacedName]warmProgress
	// failures is, per ImageWarm, what its summed-up Failed event last
	// told (failures.go).
	failures map[types.NamespacedName]failureMemory
	// proofs are the entries' verifications, by entry key, kept for
	// proofTTL after the entry was last wanted: an ImageWarm that stops
	// and starts matching the node (a label flapping) finds its proof
	// again instead of asking the registry.
	proofs map[string]proof
	// preloaded says, by runtime image ID, whether each wanted image the
	// runtime lists came to the node by other means than the agent's
	// pulls, as decided when the agent first saw it (verification.go).
	preloaded map[string]bool
}

// proof is what an entry's credentials brought (imageMemory's
// verifiedID and verifiedDigest), and when the entry was last wanted.
type proof struct {
	id, digest string
	used       time.Time
}

// proofTTL is how long a proof outlives its entry.
const proofTTL = time.Hour

// imageMemory is what the agent remembers of one wanted image.
type imageMemory struct {
	// state and since are the image's reported state and when it began.
	state warmv1.ImageState
	since metav1.Time
	// seen is set once the image was present: its disappearance is then
	// an eviction, not an image never pulled.
	seen bool
	// failures counts failed pulls since the last success.
	failures int32
	// failed is the last pull's failure, until a pull succeeds. The image
	// is not present meanwhile, even when the runtime lists it: a pull that
	// fails late (an artifact that cannot be unpacked) can leave the image
	// record behind, and a warm that cannot run anything is not done.
	failed *pull.Result
	// pulled is the last successful pull taken in.
	pulled *pull.Result
	// taken is when the last result taken in finished; an engine result
	// that finished later has not reached the agent yet.
	taken time.Time
	// verifiedID and verifiedDigest are the runtime image ID, and the
	// repository digest, that a pull under the entry's credentials last
	// brought (the digest alone when seeded from a report): the image the
	// runtime lists counts as present for the entry only while it is
	// that one.
	verifiedID, verifiedDigest string
	// refreshedAt is when the image was last pulled or first seen present,
	// for pullPolicy Always.
	refreshedAt time.Time
	// evictions counts the times in a row the image was removed from the
	// node soon after it arrived; arrivedAt is when it was last seen
	// arriving. The next pull after an eviction waits out the back-off
	// from arrivedAt.
	evictions int32
	arrivedAt time.Time
}

// BackOff is an exponential back-off: Initial, doubling up to Max.
// The zero policy never holds anything back.
type BackOff struct {
	Initial, Max time.Duration
}

// after is the wait after the n-th event in a row (n >= 1).
func (b BackOff) after(n int32) time.Duration {
	d := b.Initial
	for i := int32(1); i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// warmProgress is what was pulled for one ImageWarm since its last Warmed
// event.
type warmProgress struct {
	started time.Time
	// landed is set when any image of it arrived, pulled or brought by
	// another spelling's pull of the same image (which counts no bytes).
	landed bool
	pulled int
	bytes  uint64
}

// Retry intervals of the decisions below.
const (
	// secretRetry is how soon a pass comes back while an image fails for
	// want of credentials: Secrets are not watched, so a fixed one is
	// noticed here, and its new credentials skip the old back-off.
	secretRetry = 15 * time.Second
	// diskRetry is how soon a pass comes back while the disk is too full.
	diskRetry = 10 * time.Second
	// minPass is the least time between two timed passes.
	minPass = 100 * time.Millisecond
)

// Decide decides one pass.
func Decide(in Input) Output {
	p := &planner{in: in, out: Output{Next: in.Resync}}
	p.out.State = State{
		images:  make(map[string]imageMemory, len(in.Desired.images)),
		secrets: maps.Clone(in.State.secrets),
		warming: map[types.NamespacedName]warmProgress{},
	}
	if p.out.State.secrets == nil {
		p.out.State.secrets = map[types.NamespacedName]string{}
	}
	p.out.State.proofs = make(map[string]proof, len(in.State.proofs))
	p.proven = map[string]bool{}
	p.out.State.preloaded = map[string]bool{}
	p.indexOwners()
	for key, pr := range in.State.proofs {
		if in.Now.Sub(pr.used) < proofTTL {
			p.out.State.proofs[key] = pr
			p.prove(key, pr.id)
		}
	}
	for key := range in.Desired.images {
		m := in.State.images[key]
		if pr, ok := p.out.State.proofs[key]; ok && m.verifiedID == "" && m.verifiedDigest == "" {
			m.verifiedID, m.verifiedDigest = pr.id, pr.digest
		}
		p.out.State.images[key] = m
	}
	for nn, t := range in.State.warming {
		if in.Desired.objects[nn] != nil {
			p.out.State.warming[nn] = t
		}
	}
	p.out.State.failures = map[types.NamespacedName]failureMemory{}
	for nn, f := range in.State.failures {
		if in.Desired.objects[nn] != nil {
			p.out.State.failures[nn] = f
		}
	}
	p.folds = map[types.NamespacedName]*failureFold{}
	p.evicted = map[string]bool{}
	p.pinKept = map[string]bool{}
	p.present = map[string]bool{}
	p.artifactWaits = map[string]bool{}
	p.artifactSlot = p.artifactPulling()
	p.takeStarted()
	p.takeResults()
	p.warmIndex = warmIndex(fairWarms(in.Desired.warms, warmv1.MaxNodeWarms))
	var st warmv1.NodeWarmStatus
	complete := map[types.NamespacedName]bool{}
	doneKeys := make(map[string]bool, len(in.Desired.images))
	for nn := range p.out.State.warming {
		complete[nn] = true
	}
	for _, key := range in.Desired.Keys() {
		img, done := p.image(key, in.Desired.images[key])
		p.foldFailure(in.Desired.images[key], &img, p.out.State.images[key])
		st.Images = append(st.Images, img)
		doneKeys[key] = done
		for _, nn := range in.Desired.images[key].warms {
			complete[nn] = complete[nn] && done
		}
	}
	p.out.Pulls = onePullPerImage(p.out.Pulls)
	shareOut(p.out.Pulls)
	p.warmed(complete)
	p.failureEvents()
	p.unpins()
	p.marks()
	p.levelEvent()
	p.out.Status = p.finishStatus(st)
	p.out.pass = applyContext{desired: in.Desired, pins: in.Pins, pinTally: p.pinTally, now: in.Now}
	p.out.Status.Conditions = p.startupTaint(p.out.Status.Conditions, p.coldWarms(doneKeys), metav1.NewTime(in.Now))
	p.nodeSignals(doneKeys)
	p.out.Next = max(p.out.Next, minPass)
	return p.out
}

// planner holds one pass's work.
type planner struct {
	in  Input
	out Output
	// warmIndex is each reported ImageWarm's place in status.warms.
	warmIndex map[types.NamespacedName]int32
	pinTally  pinTally
	// evicted are the references whose eviction this pass counted: an
	// image with several entries is removed once.
	evicted map[string]bool
	// pinKept are the references some entry keeps pinned (pins.go).
	pinKept map[string]bool
	// folds sums each ImageWarm's failing images (failures.go).
	folds map[types.NamespacedName]*failureFold
	// proven holds, by provenKey, the images some entry's credentials
	// fetched: another spelling of the same repository under the same
	// credentials (a tag and its digest) needs no pull of its own.
	proven map[string]bool
	// owned indexes the proofs the pass starts from by image.
	owned owners
	// present holds the entries, by key, whose image counts as present
	// for them: only those count starts served (servedPerWarm).
	present map[string]bool
	// artifactSlot is the reference of the artifact whose pull is under
	// way or asked for this pass ("" for none); artifactWaits are the
	// entries, by key, that wait for it (artifacts.go).
	artifactSlot  string
	artifactWaits map[string]bool
}

// takeStarted notes when each ImageWarm's warming began.
func (p *planner) takeStarted() {
	for _, s := range p.in.Started {
		w := p.in.Desired.images[entryKey(s.Key, s.Tag)]
		if w == nil {
			continue
		}
		p.tally(w, func(t *warmProgress) {
			if t.started.IsZero() {
				t.started = s.At
			}
		})
		if p.in.PerImageEvents {
			p.event(eventPulling(w))
		}
	}
}

// takeResults folds finished pulls into each image's memory.
func (p *planner) takeResults() {
	for i := range p.in.Results {
		res := p.in.Results[i]
		key := entryKey(res.Ref, res.Tag)
		w := p.in.Desired.images[key]
		if w == nil {
			continue // no longer wanted: nobody to tell
		}
		m := p.out.State.images[key]
		m.taken = res.Finished
		switch {
		case res.Class == pull.ClassCanceled:
		case res.Succeeded():
			m.failures, m.failed, m.pulled, m.refreshedAt = 0, nil, &res, res.Finished
			if verifies(res) {
				m.verifiedID, m.verifiedDigest = res.ImageRef, digestOnly(res.Digest)
			}
			p.tally(w, func(t *warmProgress) {
				if t.started.IsZero() {
					t.started = res.Finished.Add(-res.Duration)
				}
				t.landed = true
				if res.Attempts > 0 { // not brought by a sibling spelling's pull
					t.pulled++
					t.bytes += res.Size
				}
			})
			if p.in.PerImageEvents {
				p.event(eventPulled(w, res))
			}
		default:
			m.failures++
			m.failed = &res
			if p.in.PerImageEvents {
				p.event(eventFailed(w, res))
			}
		}
		p.out.State.images[key] = m
	}
}

// verifies says whether a pull's success shows that its credentials may
// fetch the image: it made a PullImage call (a manifest request at
// least). An image another spelling's pull brought is no such proof: the
// next pass pulls it under its own credentials.
func verifies(res pull.Result) bool { return res.Succeeded() && res.Attempts > 0 }

// verifiedAs says whether the entry's credentials brought the image the
// runtime lists.
func (m imageMemory) verifiedAs(listing pull.PresentImage) bool {
	return (m.verifiedID != "" && m.verifiedID == listing.ID) ||
		(m.verifiedDigest != "" && digestOnly(listing.RepoDigest) == m.verifiedDigest)
}

// tally applies f to the progress of every ImageWarm that wants w.
func (p *planner) tally(w *wantedImage, f func(*warmProgress)) {
	for _, nn := range w.warms {
		t := p.out.State.warming[nn]
		f(&t)
		p.out.State.warming[nn] = t
	}
}

// imageView is what a pass knows of one wanted image.
type imageView struct {
	eng      pull.Status
	known    bool // the engine knows the image
	inFlight bool // queued or pulling
	// pending is set when the engine holds a result that finished after
	// the last one taken in: it is on its way to the agent, and its
	// outcome counts now, its tally when it arrives.
	pending bool
	// fresh is a success newer than the runtime's listing; failed is a
	// failure no success has followed.
	fresh, failed *pull.Result
	listed        bool
	listing       pull.PresentImage
	// verified: the image listed, or freshly pulled, came with the entry's
	// credentials; waived: the operator's policy needs no such proof for
	// the listed image. Present needs one of them.
	verified, waived bool
	// backOff is set while the entry's last failure holds its next pull
	// back, until retryAt. The engine holds one result per image, so the
	// entry's own failure says it when another entry's pull came since.
	backOff bool
	retryAt time.Time
	present bool
}

// image decides one wanted image: whether it is present, whether to pull
// it, its reported state, and whether it counts as done for its
// ImageWarms' Warmed events (present, with no pull of it unaccounted for).
func (p *planner) image(key string, w *wantedImage) (warmv1.NodeImage, bool) {
	if p.artifactHeld(w) {
		return p.heldArtifact(key, w), false
	}
	m := p.out.State.images[key]
	v := p.view(w, m)
	p.noteSeen(w, &m, v)
	diskHeld, evictHeld := p.pull(w, m, v)
	img := p.imageStatus(key, w, m, v, diskHeld)
	if evictHeld {
		p.evictionStatus(&img, m)
	} else if img.State == warmv1.ImagePresent {
		p.recentEvictions(&img, m)
	}
	img.Pinned = p.pinImage(w, v)
	p.present[key] = v.present
	if p.in.PerImageEvents && img.State == warmv1.ImageBackOff && m.state != warmv1.ImageBackOff && !evictHeld { // Evicted said it
		p.event(eventBackOff(w))
	}
	if img.State != m.state || m.since.IsZero() {
		m.state, m.since = img.State, metav1.NewTime(p.in.Now)
	}
	img.LastTransitionTime = transitionTime(img.State, m.since)
	p.out.State.images[key] = m
	if m.verifiedID != "" || m.verifiedDigest != "" {
		p.out.State.proofs[key] = proof{id: m.verifiedID, digest: m.verifiedDigest, used: p.in.Now}
		p.prove(key, m.verifiedID)
	}
	return img, v.present && !v.inFlight && !v.pending
}

// prove notes that the credentials of entry key fetched image id.
func (p *planner) prove(key, id string) {
	refKey, scope, _ := strings.Cut(key, " ")
	if ref, err := imageref.Parse(refKey); err == nil && id != "" {
		p.proven[provenKey(scope, ref.Name(), id)] = true
	}
}

// provenKey names an image by the credentials that fetched it, its
// repository and its runtime ID. The repository is part of it: the same
// content in another repository says nothing of whether these credentials
// may read that one.
func provenKey(scope, repo, id string) string { return scope + "\x00" + repo + "\x00" + id }

// pull asks for a pull of w when it is missing, in flight or due for a
// refresh, unless the disk is too full or the image waits out an eviction
// back-off; it says which of those two held it back.
func (p *planner) pull(w *wantedImage, m imageMemory, v imageView) (diskHeld, evictHeld bool) {
	refreshDue := w.refresh > 0 && v.present && p.in.Now.Sub(m.refreshedAt) >= w.refresh
	// A pull under way when the node stops being admitted (a new spec
	// starts a new rollout) goes on: cancelling it would waste what it
	// fetched.
	wanted := !w.suspended && (!w.waiting || v.inFlight) && (!v.present || v.inFlight || refreshDue) && (v.inFlight || !p.pinUnknown(v))
	evictHeld = wanted && !v.present && !v.inFlight && p.evictionHold(m) > 0
	diskHeld = wanted && !v.inFlight && !evictHeld && p.in.Disk.Pressure
	if wanted && !diskHeld && !evictHeld && p.artifactTurn(w, v) {
		p.out.Pulls = append(p.out.Pulls, Pull{
			Image: w.image, Priority: w.priority, Timeout: w.timeout, Secrets: w.secrets, Scope: w.scope,
			// A pull that ends between the listing and the shell's Sync
			// is not started again.
			MissingSince: p.in.ListedAt,
			refKey:       w.refKey, inFlight: v.inFlight, backOff: v.backOff, namespaces: w.namespaces(),
		})
	}
	return diskHeld, evictHeld
}

// view works out where one entry stands. Its image is present when a pull
// of it under the entry's credentials succeeded after the runtime was
// listed, or when the runtime lists the image such a pull brought, or one
// the operator's verification policy waives, and no failure is its last
// word; an image this agent never saw present counts
// only once its pull has returned (the runtime lists an image a moment
// before). The engine's view counts only when its job, or last result,
// is under the entry's credentials.
func (p *planner) view(w *wantedImage, m imageMemory) imageView {
	v := imageView{fresh: m.pulled, failed: m.failed}
	last := p.engineView(&v, w, m)
	if v.fresh != nil && (!v.fresh.Finished.After(p.in.ListedAt) || !verifies(*v.fresh)) {
		// Listed since: the runtime's record is the newer. Or another
		// spelling's pull brought it: not a proof.
		v.fresh = nil
	}
	v.backOff, v.retryAt = p.backOff(v)
	v.listing, v.listed = p.in.Runtime.Lookup(w.ref)
	pendingProof := v.pending && verifies(*last) && last.ImageRef == v.listing.ID
	v.verified = v.fresh != nil || (v.listed && (m.verifiedAs(v.listing) || pendingProof || p.pinnedByOthers(w, v.listing) ||
		p.proven[provenKey(w.scope, w.ref.Name(), v.listing.ID)]))
	v.waived = !v.verified && v.listed && p.waived(w, v.listing)
	v.present = v.fresh != nil || (v.listed && v.failed == nil && (v.verified || v.waived) && (!v.inFlight || m.seen))
	return v
}

// engineView fills in what the engine says of the entry: only a job, or a
// last result, under the entry's credentials counts. It returns the
// engine's last result.
func (p *planner) engineView(v *imageView, w *wantedImage, m imageMemory) *pull.Result {
	v.eng, v.known = p.in.Engine[w.refKey]
	v.known = v.known && v.eng.Tag == w.scope
	v.inFlight = v.known && (v.eng.State == pull.StateQueued || v.eng.State == pull.StatePulling)
	last := v.eng.Last
	v.pending = v.known && last != nil && last.Tag == w.scope && last.Finished.After(m.taken) && last.Class != pull.ClassCanceled
	switch {
	case v.pending && last.Succeeded():
		v.fresh, v.failed = last, nil
	case v.pending:
		v.failed = last
	}
	return last
}

// pinnedByOthers says whether the runtime reports the image pinned by
// someone other than warmer (its own configuration, as for the sandbox
// image, or an operator). Such an image counts as present without a pull
// under the entry's credentials: on containerd a pull replaces the
// image's labels, and would take their pin away (docs/security.md says
// what this leaves open). While warmer's own pins cannot be listed, no
// pin is known to be someone else's: it may be one warmer made for
// another namespace.
func (p *planner) pinnedByOthers(w *wantedImage, listing pull.PresentImage) bool {
	return listing.Pinned && p.in.Pins.marksKnown() && !p.in.Pins.Mine[w.refKey]
}

// pinUnknown says whether the listed image is pinned by someone warmer
// cannot tell while its pins cannot be listed: an entry with no proof of
// it then waits, as a pull could take someone else's pin away.
func (p *planner) pinUnknown(v imageView) bool {
	return v.listed && v.listing.Pinned && !p.in.Pins.marksKnown() && !v.present
}

// backOff says whether the entry's last failure holds its next pull
// back, and until when.
func (p *planner) backOff(v imageView) (bool, time.Time) {
	switch {
	case v.known && v.eng.State == pull.StateBackOff:
		return true, v.eng.RetryAt
	case !v.inFlight && v.failed != nil && v.failed.RetryAt.After(p.in.Now):
		return true, v.failed.RetryAt
	}
	return false, time.Time{}
}

// onePullPerImage keeps one pull per image: the engine keys jobs by
// image, so two entries of one image (two namespaces' credentials) pull
// one after the other. The pull under way keeps its place; then one not
// backing off, the highest priority, node-wide credentials before a
// namespace's, and namespaces in order.
func onePullPerImage(pulls []Pull) []Pull {
	chosen := map[string]int{}
	out := pulls[:0:0]
	for _, pl := range pulls {
		i, seen := chosen[pl.refKey]
		if !seen {
			chosen[pl.refKey] = len(out)
			out = append(out, pl)
			continue
		}
		if before(pl, out[i]) {
			out[i] = pl
		}
	}
	return out
}

// before says whether pull a goes before b, of the same image.
func before(a, b Pull) bool {
	switch {
	case a.inFlight != b.inFlight:
		return a.inFlight
	case a.backOff != b.backOff:
		return !a.backOff
	case a.Priority != b.Priority:
		return a.Priority > b.Priority
	case (a.Scope == "") != (b.Scope == ""):
		return a.Scope == ""
	}
	return a.Scope < b.Scope
}

// noteSeen remembers a present image as seen, and reports one seen
// before that is gone: the kubelet's garbage collector, or someone with
// crictl, removed it.
func (p *planner) noteSeen(w *wantedImage, m *imageMemory, v imageView) {
	if m.seen && !v.listed && v.fresh == nil {
		m.seen, m.refreshedAt = false, time.Time{}
		m.evictions++
		if b := p.in.EvictionBackOff; m.arrivedAt.IsZero() || p.in.Now.Sub(m.arrivedAt) > 2*b.Max {
			m.evictions = 1 // it stayed long enough: the count starts again
		}
		if !p.evicted[w.refKey] {
			p.evicted[w.refKey] = true
			p.out.Evictions++
		}
		p.event(eventEvicted(w, m.evictions, p.evictionHold(*m)))
	}
	if v.present {
		if !m.seen {
			m.arrivedAt = p.in.Now
		}
		m.seen = true
		if m.refreshedAt.IsZero() {
			m.refreshedAt = p.in.Now // first seen present: refreshed now
		}
	}
}

// imageStatus is the image's entry in the NodeWarm.
func (p *planner) imageStatus(key string, w *wantedImage, m imageMemory, v imageView, diskHeld bool) warmv1.NodeImage {
	img := warmv1.NodeImage{Image: w.refKey, SecretsNamespace: w.scope, Warms: p.warmIndices(w.warms), Attempts: m.failures, Verified: v.verified}
	switch {
	case v.present && v.listed:
		img.State, img.Digest = warmv1.ImagePresent, digestOnly(v.listing.RepoDigest)
		img.Attempts = 0
	case v.present:
		img.State, img.Digest = warmv1.ImagePresent, digestOnly(v.fresh.Digest)
		img.Attempts = 0
	case w.suspended:
		img.State = warmv1.ImageSkipped
	case w.waiting && !v.inFlight:
		img.State, img.Reason, img.Message = warmv1.ImageQueued, warmv1.ReasonWaitingForRollout, "waiting for the rollout to admit this node"
	case p.pinUnknown(v) && !v.inFlight:
		img.State, img.Message = warmv1.ImageQueued, pinUnknownStatus
	case diskHeld:
		img.State, img.Reason, img.Message = warmv1.ImageFailed, string(pull.ClassDiskPressure), statusMessage(diskMessage(p.in.Disk))
		p.soon(diskRetry)
	case v.inFlight:
		img.State, img.Progress = engineState(v.eng.State), imageProgress(v.eng)
		if v.failed != nil && m.failures > 0 {
			// A retry: the failure it retries stays said until it ends.
			img.Reason, img.Message = string(v.failed.Class), statusMessage(v.failed.Message)
		}
	case v.backOff && v.failed != nil:
		img.State, img.Reason, img.Message = warmv1.ImageBackOff, string(v.failed.Class), statusMessage(v.failed.Message)
		img.RetryAt = retryTime(v.retryAt)
		p.soon(v.retryAt.Sub(p.in.Now))
		if v.failed.Class == pull.ClassUnauthorized && len(w.secrets) > 0 {
			p.soon(secretRetry)
		}
	case p.artifactWaits[key]:
		img.State, img.Message = warmv1.ImageQueued, artifactWaitStatus
	default:
		img.State = warmv1.ImageQueued // asked for in this pass
	}
	return img
}

// evictionHold is how long the next pull of an evicted image still waits:
// one pull per back-off window, counted from its last arrival, so a node
// whose disk cannot hold what is asked does not pull the same image over
// and over.
func (p *planner) evictionHold(m imageMemory) time.Duration {
	if m.evictions == 0 || m.arrivedAt.IsZero() {
		return 0
	}
	return max(m.arrivedAt.Add(p.in.EvictionBackOff.after(m.evictions)).Sub(p.in.Now), 0)
}

// evictionStatus reports an evicted image waiting out its back-off.
func (p *planner) evictionStatus(img *warmv1.NodeImage, m imageMemory) {
	hold := p.evictionHold(m)
	img.State, img.Reason = warmv1.ImageBackOff, warmv1.ReasonEvicted
	if m.evictions > 1 {
		img.Reason = warmv1.ReasonEvictedRepeatedly
	}
	img.Message = statusMessage(evictedStatus(m.evictions, hold))
	if hold > 0 {
		img.RetryAt = retryTime(m.arrivedAt.Add(p.in.EvictionBackOff.after(m.evictions)))
	}
	p.soon(hold)
}

// retryTime is the reported time of an image's next try, to the second
// as the API keeps it.
func retryTime(at time.Time) *metav1.Time {
	t := metav1.NewTime(at.Truncate(time.Second))
	return &t
}

// recentEvictions marks a present image the node removed more than once
// in a row soon after it arrived, until it has stayed long enough for the
// count to start again. The eviction's own status (Queued, Pulling) is
// progress, which the NodeWarm may not show before the image is back:
// this is what leaves the record.
func (p *planner) recentEvictions(img *warmv1.NodeImage, m imageMemory) {
	if m.evictions < 2 || m.arrivedAt.IsZero() {
		return
	}
	left := m.arrivedAt.Add(2 * p.in.EvictionBackOff.Max).Sub(p.in.Now)
	if left <= 0 {
		return
	}
	img.Reason, img.Message = warmv1.ReasonEvictedRepeatedly, statusMessage(evictedPresentStatus(m.evictions))
	p.soon(left)
}

// soon brings the next pass forward to at most d from now.
func (p *planner) soon(d time.Duration) {
	if d < p.out.Next {
		p.out.Next = d
	}
}

// warmed records Warmed on each ImageWarm that pulled something and now has
// every image it wants on this node present, with every pull accounted
// for: a Warmed event sent while a result was still on its way would
// count short, and that result would start a second count.
func (p *planner) warmed(complete map[types.NamespacedName]bool) {
	for nn, t := range p.out.State.warming {
		if !complete[nn] {
			continue
		}
		if t.landed {
			p.event(eventWarmed(nn, t, p.in.Now))
		}
		delete(p.out.State.warming, nn)
	}
}

// finishStatus completes the NodeWarm status around the images.
func (p *planner) finishStatus(st warmv1.NodeWarmStatus) warmv1.NodeWarmStatus {
	now := metav1.NewTime(p.in.Now)
	st.Warms = fairWarms(servedPerWarm(p.in.Desired, p.in.ServedByImage, p.present), warmv1.MaxNodeWarms)
	for _, bad := range p.in.Desired.invalid {
		since := now
		if m, ok := p.in.State.images[invalidKey(bad.image)]; ok && m.state == warmv1.ImageFailed {
			since = m.since
		}
		img := warmv1.NodeImage{Image: plainText(bad.image, maxImageLength), State: warmv1.ImageFailed, Reason: warmv1.ReasonInvalidImageName,
			Message: statusMessage(bad.err.Error()), LastTransitionTime: &since, Warms: p.warmIndices([]types.NamespacedName{bad.warm})}
		p.out.State.images[invalidKey(bad.image)] = imageMemory{state: img.State, since: since}
		st.Images = append(st.Images, img)
	}
	sort.Slice(st.Images, func(i, j int) bool {
		a, b := &st.Images[i], &st.Images[j]
		return a.Image < b.Image || (a.Image == b.Image && a.SecretsNamespace < b.SecretsNamespace)
	})
	count(&st) // every image, before the list is cut
	sumProgress(&st)
	wanted := len(st.Images)
	if wanted > warmv1.MaxNodeImages {
		st.Images = fairShare(st.Images, warmv1.MaxNodeImages, entryNamespaces(p.in.Desired, st.Warms))
	}
	st.Runtime = p.in.RuntimeInfo
	st.ServedStarts = int32(min(p.in.ServedStarts, math.MaxInt32))
	st.CredentialProviders = p.in.CredentialProviders
	st.CredentialKey = p.in.CredentialKey
	st.ImageFilesystem = imageFilesystem(p.in.Disk)
	st.Conditions = runtimeCondition(p.in.Conditions, metav1.ConditionTrue, warmv1.ReasonRuntimeAnswering, "The container runtime answers CRI calls", now)
	st.Conditions = diskCondition(st.Conditions, p.in.Disk, now)
	st.Conditions = pinningCondition(st.Conditions, p.in.Pins, p.pinTally, now)
	st.Conditions = progressCondition(st.Conditions, p.in.ContentUnable, now)
	st.Conditions = yieldCondition(st.Conditions, p.in.Yield, now)
	st.Conditions = listedCondition(st.Conditions, wanted, now)
	st.Conditions = warmsCondition(st.Conditions, len(p.in.Desired.warms), now)
	return st
}

// pinUnknownStatus says why an image pinned by someone waits for its
// pull.
const pinUnknownStatus = "the runtime reports the image pinned, and warmer's own pins cannot be listed: " +
	"no pull until they can, as a pull would take a pin someone else made away"

// invalidKey keeps an invalid spec entry's memory apart from every
// normalised reference.
func invalidKey(image string) string { return "invalid " + image }

// event queues an event, with its subjects' references: the shell records
// it as it is, needing nothing of the desired set.
func (p *planner) event(e Event) { p.out.Events = append(p.out.Events, e.about(p.in.Desired)) }

// about fills in the references of e's subjects, from the desired set.
func (e Event) about(d Desired) Event {
	for _, nn := range e.warms {
		if iw := d.objects[nn]; iw != nil {
			e.Subjects = append(e.Subjects, iw)
		}
	}
	return e
}

// Seeded says whether s holds a memory, seeded or left by a pass; the
// zero State holds none.
func (s State) Seeded() bool { return s.images != nil }

// Seed takes each image's state and transition time from the report
// of an earlier run, so an agent restart does not move them, and each
// entry's proof, so it does not ask the registry about every image again.
// A report with no verified entry at all comes from an agent older than
// proofs: unless the operator has every image verified, its present
// entries are taken as proofs of their own credentials, as that agent's
// pulls brought them; they then also keep those images from counting as
// preloaded for other namespaces.
func Seed(st warmv1.NodeWarmStatus, v Verification) State {
	s := State{images: make(map[string]imageMemory, len(st.Images))}
	carry := v.Policy != AlwaysVerify && !anyVerified(st.Images)
	for _, img := range st.Images {
		m := imageMemory{state: img.State}
		if img.LastTransitionTime != nil {
			m.since = *img.LastTransitionTime
		}
		if img.State == warmv1.ImagePresent && (img.Verified || carry) {
			m.verifiedDigest = img.Digest
		}
		s.images[entryKey(img.Image, img.SecretsNamespace)] = m
	}
	return s
}

// anyVerified says whether some entry carries a proof.
func anyVerified(images []warmv1.NodeImage) bool {
	for i := range images {
		if images[i].Verified {
			return true
		}
	}
	return false
}

// levelEvent warns, once each time it starts, that the image filesystem's
// level cannot be read: the DiskPressure condition says so for as long as
// it lasts, the event tells whoever watches the node's events.
func (p *planner) levelEvent() {
	if p.in.Disk.Known {
		return
	}
	if c := meta.FindStatusCondition(p.in.Conditions, warmv1.ConditionDiskPressure); c != nil && c.Reason == warmv1.ReasonLevelUnknown {
		return
	}
	p.event(eventLevelUnknown(p.in.Disk.Pressure))
}
