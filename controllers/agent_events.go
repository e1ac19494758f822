package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// Event reasons, on the ImageWarms that want an image. The pull events are
// worded as the kubelet words its own, so they read the same in
// `kubectl describe`.
const (
	ReasonPulling           = "Pulling"
	ReasonPulled            = "Pulled"
	ReasonWarmed            = "Warmed"
	ReasonFailed            = "Failed"
	ReasonBackOff           = "BackOff"
	ReasonEvicted           = "Evicted"
	ReasonInvalidPullSecret = "InvalidPullSecret"
	ReasonInvalidImageName  = "InvalidImageName"
)

// Event actions (events.k8s.io wants one on every event).
const (
	ActionPull   = "Pull"
	ActionConfig = "ReadConfig"
	ActionWarm   = "Warm"
)

// maxEventSubjects bounds how many ImageWarms one image's event goes to.
const maxEventSubjects = warmv1.MaxRequestedBy

// Limits the API server puts on an events.k8s.io Event, in bytes. An event
// over them is refused and lost, so notes are cut and actions bounded.
const (
	maxEventNote   = 1024
	maxEventAction = 128
)

var _ pullengine.Listener = &NodeAgent{}

// PullStarted records a Pulling event. The engine calls it from its own
// goroutine.
func (a *NodeAgent) PullStarted(ref pullengine.Reference) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.startTallyLocked(ref.String(), time.Now())
	if !a.PerImageEvents {
		return
	}
	a.eventLocked(context.Background(), ref.String(), corev1.EventTypeNormal, ReasonPulling, ActionPull,
		"Pulling image %q", a.spellingLocked(ref.String(), ref.Original()))
}

// PullFinished records the outcome of a pull and asks for a pass, so that
// the NodeWarm shows it. The engine calls it from its own goroutine.
func (a *NodeAgent) PullFinished(res pullengine.Result) {
	a.mu.Lock()
	image := a.spellingLocked(res.Ref, res.Image)
	switch {
	case res.Succeeded():
		a.st.present[res.Ref] = true
		a.st.refreshedAt[res.Ref] = res.Finished
		delete(a.st.failures, res.Ref)
		a.tallyPulledLocked(res)
		if a.PerImageEvents {
			a.eventLocked(context.Background(), res.Ref, corev1.EventTypeNormal, ReasonPulled, ActionPull,
				"Successfully pulled image %q in %v. Image size: %d bytes.", image, res.Duration.Truncate(time.Millisecond), res.Size)
		}
	case res.Class == pullengine.ClassCanceled:
		// No longer wanted: nobody to tell.
	default:
		a.st.failures[res.Ref]++
		a.eventLocked(context.Background(), res.Ref, corev1.EventTypeWarning, ReasonFailed, ActionPull,
			"Failed to pull image %q: %s: %s", image, res.Class, res.Message)
	}
	a.mu.Unlock()
	a.poke()
}

// spellingLocked is the image as an ImageWarm wrote it, when known.
func (a *NodeAgent) spellingLocked(key, fallback string) string {
	if s, ok := a.st.images[key]; ok {
		return s
	}
	return fallback
}

// eventLocked records an event on each ImageWarm that wants the image
// (up to maxEventSubjects), related to this node. The recorder
// de-duplicates repeats into a series; callers only raise events on
// transitions.
func (a *NodeAgent) eventLocked(ctx context.Context, key, eventtype, reason, action, note string, args ...any) {
	warms := a.st.wanters[key]
	if len(warms) > maxEventSubjects {
		warms = warms[:maxEventSubjects]
	}
	a.eventOn(ctx, warms, eventtype, reason, actionOn(action, key), note, args...)
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
	if a := action + " " + subject; len(a) <= maxEventAction {
		return a
	}
	sum := sha256.Sum256([]byte(subject))
	return action + " #" + hex.EncodeToString(sum[:12])
}

func (a *NodeAgent) eventOn(ctx context.Context, warms []*warmv1.ImageWarm, eventtype, reason, action, note string, args ...any) {
	if a.Recorder == nil {
		return
	}
	suffix := " (node " + a.NodeName + ")"
	msg := cutBytes(fmt.Sprintf(note, args...), maxEventNote-len(suffix)) + suffix
	var related runtime.Object // a nil *Node would not be a nil Object
	if a.st.node != nil {
		related = a.st.node
	}
	for _, iw := range warms {
		if iw != nil {
			a.Recorder.Eventf(iw, related, eventtype, reason, action, "%s", msg)
		}
	}
	log.FromContext(ctx).V(1).Info("Event", "reason", reason, "message", msg)
}

// secretProblems raises, once per secret and problem, an event on the
// ImageWarms that name a secret that cannot be used.
func (a *NodeAgent) secretProblems(ctx context.Context, d desiredSet, s *secretKeyrings) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for nn := range s.rings {
		if _, bad := s.errs[nn]; !bad {
			delete(a.st.secretProblems, nn) // fixed: a new problem gets a new event
		}
	}
	problems := s.problems()
	for _, w := range d.images {
		for _, sec := range w.secrets {
			err, bad := problems[sec]
			if !bad || !a.st.noteProblemLocked(sec, err) {
				continue
			}
			var subjects []*warmv1.ImageWarm
			for _, nn := range w.warms {
				if nn.Namespace == sec.Namespace {
					subjects = append(subjects, d.objects[nn])
				}
			}
			a.eventOn(ctx, subjects, corev1.EventTypeWarning, ReasonInvalidPullSecret, actionOn(ActionConfig, sec.String()), "%v", err)
		}
	}
}

// cutBytes cuts s to at most n bytes, on a rune boundary, marking the cut
// with an ellipsis.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	n -= len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + mark
}
