package pullsecrets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/internal/credbundle"
)

// readTimeout bounds one source read, so a namespace whose reads hang
// holds a node's bundle up for this long at most.
const readTimeout = 10 * time.Second

// maxForbiddenBackOff caps how long a refused read is remembered: an
// admin who opts a namespace in waits at most this (plus Resync).
const maxForbiddenBackOff = 5 * time.Minute

// source is what was last read of one source Secret, shared by every
// node's bundle that holds it: a secret named for 1,000 nodes is read
// once a Resync, not 1,000 times.
type source struct {
	// mu is held during a read, so workers needing the same source wait
	// for one read rather than each making their own.
	mu    sync.Mutex
	entry credbundle.Entry
	// version stands for the content in a bundle's inputs: the
	// resourceVersion, or the kind of problem. Never secret data.
	version string
	read    time.Time
	// backOff is how long a Forbidden is remembered; it doubles with
	// each refusal in a row.
	backOff time.Duration
	used    time.Time
	ok      bool
}

// sources reads source Secrets by GET, each again after Resync (after a
// growing back-off when refused), and forgets those no bundle used for a
// while.
type sources struct {
	reader  client.Reader
	ns      string
	resync  time.Duration
	clock   clock.PassiveClock
	mu      sync.Mutex
	byName  map[types.NamespacedName]*source
	sweptAt time.Time
}

// result is one source as read for a bundle.
type result struct {
	src     types.NamespacedName
	entry   credbundle.Entry
	version string
}

// readAll reads srcs side by side. A source that could not be read for a
// reason a retry may cure is left out, its error returned: the agent waits
// its grace for it, and the next pass reads it again.
func (s *sources) readAll(ctx context.Context, srcs []types.NamespacedName) ([]result, error) {
	out := make([]result, len(srcs))
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() {
			out[i], errs[i] = s.get(ctx, src)
		})
	}
	wg.Wait()
	kept := out[:0]
	for i, r := range out {
		if errs[i] == nil {
			kept = append(kept, r)
		}
	}
	s.sweep()
	return kept, errors.Join(errs...)
}

func (s *sources) get(ctx context.Context, src types.NamespacedName) (result, error) {
	e := s.entryFor(src)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := s.clock.Now()
	e.used = now
	wait := s.resync
	if e.backOff > 0 {
		wait = e.backOff
	}
	if !e.ok || now.Sub(e.read) >= wait {
		if err := s.read(ctx, src, e, now); err != nil {
			if !e.ok {
				return result{}, err
			}
			// Keep what was read last: a flaky read does not take a
			// secret out of bundles.
		}
	}
	return result{src: src, entry: e.entry, version: e.version}, nil
}

func (s *sources) entryFor(src types.NamespacedName) *source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[types.NamespacedName]*source{}
	}
	e, ok := s.byName[src]
	if !ok {
		e = &source{}
		s.byName[src] = e
	}
	return e
}

// read reads src into e. Only errors a retry may cure are returned.
func (s *sources) read(ctx context.Context, src types.NamespacedName, e *source, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	var sec corev1.Secret
	err := s.reader.Get(ctx, src, &sec)
	prev := e.backOff // 0 unless the read before was refused
	e.backOff = 0
	switch {
	case err == nil:
		e.entry, e.version = credbundle.EntryOf(&sec), "rv:"+sec.ResourceVersion
	case apierrors.IsNotFound(err):
		e.entry, e.version = credbundle.Problem(fmt.Sprintf("pull secret %q not found in namespace %q", src.Name, src.Namespace)), "missing"
	case apierrors.IsForbidden(err):
		e.entry, e.version = credbundle.Problem(forbidden(src, s.ns)), "forbidden"
		e.backOff = min(max(2*prev, s.resync), maxForbiddenBackOff)
	default:
		return fmt.Errorf("reading pull secret %q of namespace %q: %w", src.Name, src.Namespace, err)
	}
	e.read, e.ok = now, true
	return nil
}

// forbidden says what a namespace admin does to let warmer use src.
func forbidden(src types.NamespacedName, ns string) string {
	return fmt.Sprintf("warmer may not read pull secret %q of namespace %q: bind ClusterRole %s to ServiceAccount %s/warmer-controller in that namespace (a RoleBinding), or a Role granting get on this Secret by name",
		src.Name, src.Namespace, ReaderRole, ns)
}

// sweep forgets sources no bundle used for two Resyncs, at most once a
// Resync: their content leaves the controller's memory.
func (s *sources) sweep() {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.sweptAt) < s.resync {
		return
	}
	s.sweptAt = now
	for nn, e := range s.byName {
		if e.mu.TryLock() {
			if now.Sub(e.used) > 2*s.resync {
				delete(s.byName, nn)
			}
			e.mu.Unlock()
		}
	}
}
