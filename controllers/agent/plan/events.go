package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// Every event the agent records is made here, by one constructor per
// reason; the planner decides when, the shell (record) sends them.
//
// Events go on the ImageWarms that want an image, related to the node.
// The pull events are worded as the kubelet words its own, so they read
// the same in `kubectl describe`. Pull events are summed up per ImageWarm
// by default: the kubelet records Pulling and Pulled for every image of
// every Pod, and a pre-warmer doing the same records two events per image
// per node, all on one ImageWarm (20,000 for ten images on 1,000 nodes),
// which bury the failures in `kubectl describe`. So each node records one
// Warmed event per ImageWarm when the last of its images arrives, one
// Failed event per ImageWarm and set of failing images (failures.go), and
// keeps per-image events for evictions and bad secrets.
// --per-image-events records the kubelet's per-image events instead.

// Event actions (events.k8s.io wants one on every event).
const (
	ActionPull   = "Pull"
	ActionConfig = "ReadConfig"
	ActionWarm   = "Warm"
	ActionTaint  = "RemoveTaint"
	ActionGuard  = "GuardDisk"
)

// maxEventSubjects bounds how many ImageWarms one image's event goes to.
const maxEventSubjects = warmv1.MaxRequestedBy

// Limits the API server puts on an events.k8s.io Event, in bytes. An event
// over them is refused and lost, so notes are cut and actions bounded.
const (
	// MaxEventNote bounds an event's note, the node's name included.
	MaxEventNote   = 1024
	MaxEventAction = 128
)

// Event is one event to record on each of its subjects.
type Event struct {
	// Subjects are the ImageWarms to record it on, as references without
	// a resourceVersion (the recorder keys its series on them, and an
	// ImageWarm's version changes with every status write).
	Subjects []*warmv1.ImageWarm
	// warms names them, as the constructors choose them.
	warms []types.NamespacedName
	// OnNode records it on the Node too, for `kubectl describe node`.
	OnNode bool
	// Warning makes it a Warning event; Normal otherwise.
	Warning bool
	// Reason, Action and Note are the events.k8s.io fields of the same
	// names; the shell adds the node's name to the note.
	Reason, Action, Note string
}

func eventPulling(w *wantedImage) Event {
	return imageEvent(w, false, warmv1.ReasonPulling, fmt.Sprintf("Pulling image %q", w.image))
}

func eventPulled(w *wantedImage, res pull.Result) Event {
	return imageEvent(w, false, warmv1.ReasonPulled, fmt.Sprintf("Successfully pulled image %q in %v. Image size: %d bytes.",
		w.image, res.Duration.Truncate(time.Millisecond), res.Size))
}

func eventFailed(w *wantedImage, res pull.Result) Event {
	return imageEvent(w, true, warmv1.ReasonFailed, fmt.Sprintf("Failed to pull image %q: %s: %s", w.image, res.Class, res.Message))
}

func eventBackOff(w *wantedImage) Event {
	return imageEvent(w, false, warmv1.ReasonBackOff, fmt.Sprintf("Back-off pulling image %q", w.image))
}

func eventEvicted(w *wantedImage, times int32, hold time.Duration) Event {
	if times <= 1 && hold <= 0 {
		return imageEvent(w, true, warmv1.ReasonEvicted, fmt.Sprintf("Image %q is no longer on the node; pulling it again", w.image))
	}
	return imageEvent(w, true, warmv1.ReasonEvicted, fmt.Sprintf("Image %q is no longer on the node: %s", w.image, evictedMessage(times, hold)))
}

// evictedStatus is the short form of evictedMessage, for the NodeWarm's
// bounded per-image message.
func evictedStatus(times int32, hold time.Duration) string {
	return fmt.Sprintf("removed %d time(s) in a row soon after arriving; next pull in %v. The disk is too small for what is asked here "+
		"(or imageMaximumGCAge collects unused images): add room, or set retention: Pinned", times, hold.Round(time.Second))
}

// evictedPresentStatus is evictedStatus for an image back on the node.
func evictedPresentStatus(times int32) string {
	return fmt.Sprintf("present again, after being removed %d time(s) in a row soon after arriving. The disk is too small for what is asked here "+
		"(or imageMaximumGCAge collects unused images): add room, or set retention: Pinned", times)
}

// evictedMessage says why an evicted image waits, and what to do about
// it.
func evictedMessage(times int32, hold time.Duration) string {
	return fmt.Sprintf("removed %d time(s) in a row soon after it arrived (by the kubelet's image garbage collector, or by hand); "+
		"pulling it again in %v. The image filesystem is too small for what the ImageWarms ask of this node, or the kubelet's "+
		"imageMaximumGCAge collects images no pod uses: give the images more room, or set spec.retention: Pinned",
		times, hold.Round(time.Second))
}

func eventWarmed(nn types.NamespacedName, t warmProgress, now time.Time) Event {
	return Event{warms: []types.NamespacedName{nn}, Reason: warmv1.ReasonWarmed, Action: actionOn(ActionWarm, nn.String()),
		Note: fmt.Sprintf("Every image is present: pulled %d (%d bytes) in %v", t.pulled, t.bytes, now.Sub(t.started).Truncate(time.Millisecond))}
}

func eventBadSecret(subjects []types.NamespacedName, secret types.NamespacedName, problem string) Event {
	return Event{warms: subjects, Warning: true, Reason: warmv1.ReasonInvalidPullSecret,
		Action: actionOn(ActionConfig, secret.String()), Note: problem}
}

func eventTaintRemoved(key string) Event {
	return Event{OnNode: true, Reason: warmv1.ReasonStartupTaintRemoved, Action: actionOn(ActionTaint, key),
		Note: fmt.Sprintf("Removed taint %s: every ImageWarm holding it is warm", key)}
}

// eventTaintDeadline is a warning on the Node and on the ImageWarms that
// were not warm in time.
func eventTaintDeadline(key string, cold []types.NamespacedName) Event {
	return Event{warms: cold[:min(len(cold), maxEventSubjects)], OnNode: true, Warning: true,
		Reason: warmv1.ReasonStartupTaintDeadline, Action: actionOn(ActionTaint, key),
		Note: fmt.Sprintf("Removed taint %s at its deadline: %s not warm on this node", key, namedWarms(cold))}
}

// imageEvent is an event about one image, on (some of) the ImageWarms that
// want it.
func imageEvent(w *wantedImage, warning bool, reason, note string) Event {
	subjects := w.warms
	if len(subjects) > maxEventSubjects {
		subjects = subjects[:maxEventSubjects]
	}
	return Event{warms: subjects, Warning: warning, Reason: reason, Action: actionOn(ActionPull, w.ref.String()), Note: note}
}

// actionOn makes an event's action name what it acts on: an image or a
// secret. client-go's events.k8s.io recorder folds events into a series
// keyed by regarding, related, type, action, reason and reporter, but not
// the note; with one action for every image, a Pulled event for a second
// image of an ImageWarm would only bump the count of the first image's
// event, and its own note would never be seen. Repeats about the same
// subject still fold. A subject too long for the API's bound on actions is
// named by a hash of it instead.
func actionOn(action, subject string) string {
	if a := action + " " + subject; len(a) <= MaxEventAction {
		return a
	}
	sum := sha256.Sum256([]byte(subject))
	return action + " #" + hex.EncodeToString(sum[:12])
}

// stub is a minimal reference to an ImageWarm, enough to be an event's
// subject, without its resourceVersion (see record).
func stub(iw *warmv1.ImageWarm) *warmv1.ImageWarm {
	return &warmv1.ImageWarm{
		TypeMeta:   metav1.TypeMeta{APIVersion: warmv1.GroupVersion.String(), Kind: "ImageWarm"},
		ObjectMeta: metav1.ObjectMeta{Namespace: iw.Namespace, Name: iw.Name, UID: iw.UID},
	}
}

// eventLevelUnknown says, on the Node, that the disk guard cannot read the
// image filesystem's level, and what it does about it.
func eventLevelUnknown(held bool) Event {
	note := "The image filesystem's level cannot be read (the kubelet's /stats/summary or the runtime's image filesystem): pulls are not held back when the disk is full"
	if held {
		note = "The image filesystem's level cannot be read (the kubelet's /stats/summary or the runtime's image filesystem): every new pull is held until it can"
	}
	return Event{OnNode: true, Warning: true, Reason: warmv1.ReasonLevelUnknown, Action: ActionGuard, Note: note}
}
