package pullengine

import (
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Back-off defaults, the kubelet's image pull back-off.
const (
	DefaultBackOffInitial = 10 * time.Second
	DefaultBackOffMax     = 300 * time.Second
	// DefaultBackOffJitter is the agent's default share of each wait drawn
	// at random. At the 300 s cap it spreads one image's retries across a
	// fleet over a minute, while no node waits longer than the kubelet would.
	DefaultBackOffJitter = 0.2
	// MaxBackOffJitter bounds the share: beyond it a failing image would be
	// retried much more often than the kubelet's schedule.
	MaxBackOffJitter = 0.5
	// maxLargeFloor bounds how long a large image's failed attempt makes
	// its next wait: a large image that fails is still tried every hour.
	maxLargeFloor = time.Hour
)

// backoff holds per-image exponential back-off on client-go's
// flowcontrol.Backoff. Keys combine the normalised reference and a hash of
// the credentials tried, so a changed secret starts from a fresh key and
// retries at once, while an unchanged one keeps waiting.
//
// Each wait is the kubelet's, shortened by a random share of at most
// jitter: nodes that failed together (a registry outage) drift apart and
// do not come back in one burst, and no node waits longer than the kubelet
// would. flowcontrol's own jitter lengthens waits and vanishes at the cap,
// where a fleet's retries line up; so the doubling is flowcontrol's, the
// spread ours.
//
// A large image's failure also sets a floor under the wait (finish.go's
// backoffFloorLocked), the one case where a node waits longer than the
// kubelet would.
type backoff struct {
	b      *flowcontrol.Backoff
	clock  clock.PassiveClock
	jitter float64
	rand   func() float64

	mu sync.Mutex
	// until records when each key's back-off ends: flowcontrol.Backoff
	// knows the unspread wait only, and the agent wants the retry time for
	// its status and requeue.
	until map[string]time.Time
}

func newBackoff(initial, maxDelay time.Duration, jitter float64, c clock.Clock) *backoff {
	b := flowcontrol.NewBackOff(initial, maxDelay)
	b.Clock = c
	return &backoff{b: b, clock: c, jitter: min(max(jitter, 0), MaxBackOffJitter), rand: rand.Float64, until: map[string]time.Time{}}
}

// backoffKey is the back-off key of ref pulled with creds.
func backoffKey(ref string, creds []Credential) string {
	return ref + "|" + credentialsHash(creds)
}

// failed extends key's back-off (starting or doubling it, up to the cap) and
// returns when the next attempt may start: not before floor has passed
// (at most maxLargeFloor), whatever the back-off says.
func (b *backoff) failed(key string, floor time.Duration) time.Time {
	now := b.clock.Now()
	b.b.Next(key, now)
	wait := b.b.Get(key)
	if b.jitter > 0 {
		wait -= time.Duration(b.jitter * b.rand() * float64(wait))
	}
	until := now.Add(max(wait, min(floor, maxLargeFloor)))
	b.mu.Lock()
	b.until[key] = until
	b.mu.Unlock()
	return until
}

// retryAt reports whether key is backing off, and until when.
func (b *backoff) retryAt(key string) (time.Time, bool) {
	b.mu.Lock()
	until, ok := b.until[key]
	b.mu.Unlock()
	if !ok || !b.clock.Now().Before(until) {
		return time.Time{}, false
	}
	return until, true
}

// reset forgets key's back-off after a success.
func (b *backoff) reset(key string) {
	b.b.Reset(key)
	b.mu.Lock()
	delete(b.until, key)
	b.mu.Unlock()
}

// gc drops entries that have been quiet long enough to start afresh, so
// keys of images (or secrets) no longer used do not pile up. A wait set
// by a floor can outlast flowcontrol's memory of the key: kept till it ends.
func (b *backoff) gc() {
	b.b.GC()
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, until := range b.until {
		if b.b.Get(k) == 0 && !now.Before(until) {
			delete(b.until, k)
		}
	}
}
