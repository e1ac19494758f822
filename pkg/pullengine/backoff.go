package pullengine

import (
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Back-off defaults, the kubelet's image pull back-off.
const (
	DefaultBackOffInitial = 10 * time.Second
	DefaultBackOffMax     = 300 * time.Second
)

// backoff holds per-image exponential back-off on client-go's
// flowcontrol.Backoff. Keys combine the normalised reference and a hash of
// the credentials tried, so a changed secret starts from a fresh key and
// retries at once, while an unchanged one keeps waiting.
type backoff struct {
	b     *flowcontrol.Backoff
	clock clock.PassiveClock

	mu sync.Mutex
	// since records when each key's back-off was last extended:
	// flowcontrol.Backoff keeps it too, but does not expose it, and the
	// agent wants the retry time for its status and requeue.
	since map[string]time.Time
}

func newBackoff(initial, maxDelay time.Duration, c clock.Clock) *backoff {
	b := flowcontrol.NewBackOff(initial, maxDelay)
	b.Clock = c
	return &backoff{b: b, clock: c, since: map[string]time.Time{}}
}

// backoffKey is the back-off key of ref pulled with creds.
func backoffKey(ref string, creds []Credential) string {
	return ref + "|" + credentialsHash(creds)
}

// failed extends key's back-off (starting or doubling it, up to the cap) and
// returns when the next attempt may start.
func (b *backoff) failed(key string) time.Time {
	now := b.clock.Now()
	b.b.Next(key, now)
	b.mu.Lock()
	b.since[key] = now
	b.mu.Unlock()
	return now.Add(b.b.Get(key))
}

// retryAt reports whether key is backing off, and until when.
func (b *backoff) retryAt(key string) (time.Time, bool) {
	now := b.clock.Now()
	if !b.b.IsInBackOffSinceUpdate(key, now) {
		return time.Time{}, false
	}
	b.mu.Lock()
	since := b.since[key]
	b.mu.Unlock()
	return since.Add(b.b.Get(key)), true
}

// reset forgets key's back-off after a success.
func (b *backoff) reset(key string) {
	b.b.Reset(key)
	b.mu.Lock()
	delete(b.since, key)
	b.mu.Unlock()
}

// gc drops entries that have been quiet long enough to start afresh, so
// keys of images (or secrets) no longer used do not pile up.
func (b *backoff) gc() {
	b.b.GC()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.since {
		if b.b.Get(k) == 0 {
			delete(b.since, k)
		}
	}
}
