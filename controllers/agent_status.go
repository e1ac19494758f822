package controllers

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// secretRetry is how soon a pass comes back while an image fails for want
// of credentials: Secrets are not watched, so a fixed one is noticed here,
// and its new credentials skip the old back-off.
const secretRetry = 15 * time.Second

// report turns the pass into the NodeWarm status, raises events on state
// changes, writes the status if it changed, and says when the next pass is
// due.
func (a *NodeAgent) report(ctx context.Context, node *corev1.Node, nw *warmv1.NodeWarm, d desiredSet,
	p *pullengine.Presence, statuses map[string]pullengine.Status) (time.Duration, error) {
	now := time.Now()
	a.mu.Lock()
	status := a.buildStatusLocked(ctx, d, p, statuses, metav1.NewTime(now))
	a.mu.Unlock()
	status.Runtime = a.Runtime
	disk := a.Engine.DiskUsage(ctx)
	status.ImageFilesystem = imageFilesystem(disk)
	status.Conditions = runtimeCondition(nw.Status.Conditions, metav1.ConditionTrue, "RuntimeAnswering", "The container runtime answers CRI calls")
	status.Conditions = diskCondition(status.Conditions, disk)
	setGauges(status)

	next := a.nextPass(d, statuses, now)
	wait, err := a.maybeWrite(ctx, nw, status)
	if wait > 0 && wait < next {
		next = wait
	}
	return next, err
}

// buildStatusLocked works out every wanted image's state.
func (a *NodeAgent) buildStatusLocked(ctx context.Context, d desiredSet, p *pullengine.Presence,
	statuses map[string]pullengine.Status, now metav1.Time) warmv1.NodeWarmStatus {
	prev := map[string]warmv1.NodeImage{}
	if a.st.reported != nil {
		for _, img := range a.st.reported.Images {
			prev[img.Image] = img
		}
	}
	st := warmv1.NodeWarmStatus{Warms: d.warms}
	states := make(map[string]warmv1.ImageState, len(d.images))
	for _, key := range d.sortedKeys() {
		img := a.imageStatusLocked(d.images[key], p, statuses, prev[key], now)
		// Events follow the state seen in the last pass, not the last
		// write: a deferred write must not repeat them.
		a.transitionEventsLocked(ctx, d.images[key], a.st.states[key], img)
		states[key] = img.State
		st.Images = append(st.Images, img)
	}
	a.st.states = states
	a.warmedEventsLocked(ctx, d, states)
	for _, bad := range d.invalid {
		img := warmv1.NodeImage{Image: bad.image, State: warmv1.ImageFailed, Reason: string(pullengine.ClassInvalidImageName),
			Message: cut(bad.err.Error()), LastTransitionTime: now, RequestedBy: []string{bad.warm.String()}}
		if old, ok := prev[bad.image]; ok && old.State == img.State {
			img.LastTransitionTime = old.LastTransitionTime
		}
		st.Images = append(st.Images, img)
	}
	sort.Slice(st.Images, func(i, j int) bool { return st.Images[i].Image < st.Images[j].Image })
	if len(st.Images) > warmv1.MaxNodeImages {
		st.Images = st.Images[:warmv1.MaxNodeImages]
	}
	if len(st.Warms) > 1024 {
		st.Warms = st.Warms[:1024]
	}
	count(&st)
	return st
}

// imageStatusLocked is one image's state: present in the runtime, or as
// far as the engine has got with it.
func (a *NodeAgent) imageStatusLocked(w *wantedImage, p *pullengine.Presence, statuses map[string]pullengine.Status,
	prev warmv1.NodeImage, now metav1.Time) warmv1.NodeImage {
	key := w.ref.String()
	img := warmv1.NodeImage{Image: key, RequestedBy: requestedBy(w), Attempts: a.st.failures[key]}
	s, known := statuses[key]
	switch pi, present := p.Lookup(w.ref); {
	case present:
		img.State, img.ImageID, img.Digest, img.SizeBytes = warmv1.ImagePresent, pi.ID, digestOnly(pi.RepoDigest), int64(pi.Size)
	case known && s.State == pullengine.StatePulled && s.Last != nil:
		// Pulled after this pass listed the runtime's images.
		img.State, img.ImageID, img.Digest, img.SizeBytes = warmv1.ImagePresent, s.Last.ImageRef, digestOnly(s.Last.Digest), int64(s.Last.Size)
	case known:
		img.State = engineState(s.State)
		if s.Last != nil && !s.Last.Succeeded() && (img.State == warmv1.ImageBackOff || img.State == warmv1.ImageFailed) {
			img.Reason, img.Message = string(s.Last.Class), cut(s.Last.Message)
		}
	case w.suspended:
		img.State = warmv1.ImageSkipped
	default:
		img.State = warmv1.ImageQueued
	}
	if img.State == warmv1.ImagePresent {
		img.Attempts = 0
	}
	img.LastTransitionTime = now
	if prev.State == img.State {
		img.LastTransitionTime = prev.LastTransitionTime
	}
	return img
}

// transitionEventsLocked raises the events that belong to a change of
// state rather than to a pull: entering back-off.
func (a *NodeAgent) transitionEventsLocked(ctx context.Context, w *wantedImage, prev warmv1.ImageState, cur warmv1.NodeImage) {
	if cur.State == warmv1.ImageBackOff && prev != warmv1.ImageBackOff {
		a.eventLocked(ctx, cur.Image, corev1.EventTypeNormal, ReasonBackOff, ActionPull, "Back-off pulling image %q", w.image)
	}
}

func engineState(s pullengine.State) warmv1.ImageState {
	switch s {
	case pullengine.StatePulling:
		return warmv1.ImagePulling
	case pullengine.StateBackOff:
		return warmv1.ImageBackOff
	case pullengine.StateFailed:
		return warmv1.ImageFailed
	case pullengine.StatePulled:
		return warmv1.ImagePresent
	default:
		return warmv1.ImageQueued
	}
}

func requestedBy(w *wantedImage) []string {
	n := len(w.warms)
	if n > warmv1.MaxRequestedBy {
		n = warmv1.MaxRequestedBy
	}
	out := make([]string, n)
	for i := range out {
		out[i] = w.warms[i].String()
	}
	return out
}

// count fills in the summary counts.
func count(st *warmv1.NodeWarmStatus) {
	st.Desired, st.Present, st.Pulling, st.Failed = int32(len(st.Images)), 0, 0, 0
	for _, img := range st.Images {
		switch img.State {
		case warmv1.ImagePresent:
			st.Present++
		case warmv1.ImagePulling, warmv1.ImageQueued:
			st.Pulling++
		case warmv1.ImageBackOff, warmv1.ImageFailed:
			st.Failed++
		}
	}
}

// digestOnly keeps "sha256:..." of "name@sha256:...".
func digestOnly(repoDigest string) string {
	if i := strings.LastIndexByte(repoDigest, '@'); i >= 0 {
		return repoDigest[i+1:]
	}
	return repoDigest
}

// cut bounds a message to what the API takes, on a rune boundary.
func cut(msg string) string {
	r := []rune(msg)
	if len(r) <= warmv1.MaxMessageLength {
		return msg
	}
	return string(r[:warmv1.MaxMessageLength-1]) + "…"
}

func imageFilesystem(u pullengine.DiskUsage) *warmv1.ImageFilesystem {
	if u.Mountpoint == "" && !u.Known {
		return nil
	}
	fs := &warmv1.ImageFilesystem{Mountpoint: u.Mountpoint, UsedBytes: int64(u.ImagesBytes)}
	if u.Known {
		fs.CapacityBytes, fs.UsedPercent = int64(u.CapacityBytes), int32(u.Percent)
	}
	return fs
}

// nextPass is when the next pass is due: the resync period, or sooner when
// a back-off ends or credentials may have been fixed.
func (a *NodeAgent) nextPass(d desiredSet, statuses map[string]pullengine.Status, now time.Time) time.Duration {
	next := a.ResyncPeriod
	for key, s := range statuses {
		if !s.RetryAt.IsZero() {
			if wait := s.RetryAt.Sub(now); wait > 0 && wait < next {
				next = wait
			}
		}
		if w := d.images[key]; w != nil && s.Last != nil && s.Last.Class == pullengine.ClassUnauthorized && len(w.secrets) > 0 && secretRetry < next {
			next = secretRetry
		}
	}
	if next < 100*time.Millisecond {
		next = 100 * time.Millisecond
	}
	return next
}
