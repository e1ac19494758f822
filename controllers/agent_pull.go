package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// pull hands the engine every wanted image that is missing, or due a
// refresh under pullPolicy Always, and returns the engine's view of each
// by normalised reference. Images no longer wanted lose their queued and
// running pulls in the same call. Evictions (an image this agent saw
// present that has gone) are reported on the way.
//
// listedAt is when the runtime's images were listed: a pull that finished
// after it is not missing, only not yet listed, and is not pulled again.
func (a *NodeAgent) pull(ctx context.Context, node *corev1.Node, d desiredSet, p *pullengine.Presence,
	listedAt time.Time) map[string]pullengine.Status {
	now := time.Now()
	out := map[string]pullengine.Status{}
	secrets := newSecretKeyrings(a.APIReader)
	var reqs []pullengine.Request
	a.mu.Lock()
	// Who wants what is set first: eviction events below need it.
	a.st.setWantersLocked(d, node)
	for _, key := range d.sortedKeys() {
		w := d.images[key]
		_, present := p.Lookup(w.ref)
		if s, ok := a.pulledSince(key, listedAt); !present && ok {
			out[key] = s
			continue
		}
		a.noteEvictionLocked(ctx, w, present)
		if w.suspended || (present && !a.st.refreshDueLocked(key, w.refresh, now) && !a.pulling(key)) {
			continue
		}
		reqs = append(reqs, pullengine.Request{Image: w.image, Priority: w.priority, Timeout: w.timeout})
	}
	a.mu.Unlock()

	// Secrets are read outside the lock; only images being pulled need them.
	for i := range reqs {
		w := d.images[mustKey(reqs[i].Image)]
		reqs[i].Keyring = secrets.keyring(ctx, w.secrets)
	}
	a.secretProblems(ctx, d, secrets)

	for _, s := range a.Engine.Sync(ctx, reqs) {
		out[s.Ref] = s
	}
	return out
}

// mustKey normalises a reference already known to parse.
func mustKey(image string) string {
	ref, _ := pullengine.ParseReference(image)
	return ref.String()
}

// pulledSince returns the engine's status of an image whose pull succeeded
// after t.
func (a *NodeAgent) pulledSince(key string, t time.Time) (pullengine.Status, bool) {
	s, ok := a.Engine.Status(key)
	if !ok || s.State != pullengine.StatePulled || s.Last == nil || !s.Last.Finished.After(t) {
		return pullengine.Status{}, false
	}
	return s, true
}

// pulling says whether a pull of the image is under way. Such a pull is
// kept even when the image already shows as present: the runtime lists an
// image a moment before its pull call returns, and cancelling then would
// count a finished pull as cancelled.
func (a *NodeAgent) pulling(key string) bool {
	s, ok := a.Engine.Status(key)
	return ok && s.State == pullengine.StatePulling
}
