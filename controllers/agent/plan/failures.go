package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Failures are summed up per ImageWarm, as successes are (Warmed): one
// Failed event per ImageWarm and node names how many of its images fail
// to pull here, by reason, and the first few. An ImageWarm of 100 images
// of which 50 are missing, on 1,000 nodes, makes 1,000 event objects
// rather than 100,000, and a failing image's retries write none: the
// event is recorded when the set of failing images (by reason) changes,
// once that set has held still for failureSettle, and the same set seen
// again folds into its own series. A retry under way keeps the image in
// the set with its last reason, so a retry does not change it.
// --per-image-events records the kubelet's per-image Failed and BackOff
// events instead.

// ActionPullFailures is the action of the summed-up Failed event.
const ActionPullFailures = "PullFailures"

// failureSettle is how long an ImageWarm's set of failing images must
// hold still before it is told: a burst of failures (a registry's 404s
// coming in at the pull rate) makes one event.
const failureSettle = 5 * time.Second

// failureWaitMax bounds the wait of a set that keeps changing.
const failureWaitMax = time.Minute

// maxFailuresNamed is how many failing images the event names.
const maxFailuresNamed = 3

// failureMemory is what the agent remembers of one ImageWarm's failures
// here: the set last told, and the set seen since it last changed.
type failureMemory struct {
	told    string
	pending string
	since   time.Time
	first   time.Time
}

// failureFold is one ImageWarm's images in one pass.
type failureFold struct {
	images int
	failed []failedImage
}

type failedImage struct {
	image, reason, message string
}

// foldFailure counts an entry of w for each ImageWarm that wants it:
// failing when its last pull failed and no pull succeeded since.
func (p *planner) foldFailure(w *wantedImage, img *warmv1.NodeImage, m imageMemory) {
	if p.in.PerImageEvents {
		return
	}
	var f *failedImage
	switch {
	case img.Reason == warmv1.ReasonEvictedRepeatedly:
		// Held after evictions, not a failed pull: Evicted said it.
	case img.State == warmv1.ImageFailed || img.State == warmv1.ImageBackOff:
		f = &failedImage{image: w.image, reason: img.Reason, message: img.Message}
	case m.failed != nil && img.State != warmv1.ImagePresent:
		f = &failedImage{image: w.image, reason: string(m.failed.Class), message: statusMessage(m.failed.Message)}
	}
	for _, nn := range w.warms {
		fold := p.folds[nn]
		if fold == nil {
			fold = &failureFold{}
			p.folds[nn] = fold
		}
		fold.images++
		if f != nil {
			fold.failed = append(fold.failed, *f)
		}
	}
}

// failureEvents records the Failed event of each ImageWarm whose set of
// failing images changed and has held still since.
func (p *planner) failureEvents() {
	if p.in.PerImageEvents {
		return
	}
	for nn, fold := range p.folds {
		mem := p.out.State.failures[nn]
		key := fold.key()
		switch {
		case key == mem.told:
			mem.pending, mem.first = key, time.Time{}
		case key != mem.pending:
			mem.pending, mem.since = key, p.in.Now
			if mem.first.IsZero() {
				mem.first = p.in.Now
			}
		}
		if key != mem.told {
			wait := min(mem.since.Add(failureSettle).Sub(p.in.Now), mem.first.Add(failureWaitMax).Sub(p.in.Now))
			if wait > 0 {
				p.soon(wait)
			} else {
				if key != "" {
					p.event(eventFailures(nn, fold, key))
				}
				mem.told, mem.first = key, time.Time{}
			}
		}
		p.out.State.failures[nn] = mem
	}
}

// key names the set of failing images and their reasons; "" for none.
func (f *failureFold) key() string {
	if len(f.failed) == 0 {
		return ""
	}
	slices.SortFunc(f.failed, func(a, b failedImage) int {
		return cmp.Or(strings.Compare(a.image, b.image), strings.Compare(a.reason, b.reason))
	})
	h := sha256.New()
	for _, x := range f.failed {
		fmt.Fprintf(h, "%s\x00%s\x00", x.image, x.reason)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// eventFailures is the summed-up Failed event of one ImageWarm: its
// action names the set, so the same set told again folds into its
// series, and another set is an event of its own, with its own note.
func eventFailures(nn types.NamespacedName, f *failureFold, key string) Event {
	return Event{warms: []types.NamespacedName{nn}, Warning: true, Reason: warmv1.ReasonFailed,
		Action: actionOn(ActionPullFailures, "#"+key), Note: failuresNote(f)}
}

// failuresNote says how many images fail, by reason, and the first few
// with their messages, within an event note's bound.
func failuresNote(f *failureFold) string {
	byReason := map[string]int{}
	for _, x := range f.failed {
		byReason[x.reason]++
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(byReason[b]-byReason[a], strings.Compare(a, b)) })
	counts := make([]string, len(reasons))
	for i, r := range reasons {
		counts[i] = fmt.Sprintf("%s %d", r, byReason[r])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d images failed to pull (%s).", len(f.failed), f.images, strings.Join(counts, ", "))
	// What is left of the note, the node's name and the closing words
	// aside, is shared by the images named.
	per := max(40, (MaxEventNote-320-b.Len())/maxFailuresNamed)
	for _, x := range f.failed[:min(len(f.failed), maxFailuresNamed)] {
		head := fmt.Sprintf(" %q: %s: ", plainText(x.image, per/2), x.reason)
		// The message keeps its ends: its cause comes last.
		fmt.Fprintf(&b, "%s%s;", head, plainText(x.message, max(20, per-len(head)-1)))
	}
	if more := len(f.failed) - maxFailuresNamed; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	b.WriteString(" (the node's NodeWarm lists each)")
	return b.String()
}
