package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// heldCredentials is what the agent keeps of its node's credential
// bundle across passes: the bundle as last opened, so pulls whose
// credentials it holds go on while the bundle cannot be read (the API
// server or the controller down, a restart of the controller between
// seals), and when each secret was first found missing from it.
type heldCredentials struct {
	bundle  *credbundle.Bundle
	missing map[types.NamespacedName]time.Time
}

// secretKeyrings finds the pull secrets of one reconcile pass in the
// node's credential bundle (internal/credbundle): one Secret in warmer's
// namespace, sealed to this agent's key, the only Secret it reads. The
// bundle is read with a plain GET through an uncached reader, at most
// once a pass and only when a pull needs credentials, so a warm node
// reads none.
type secretKeyrings struct {
	reader client.Reader
	// ns is warmer's namespace; node the node's name.
	ns, node string
	key      *credbundle.KeyPair
	held     *heldCredentials
	now      time.Time

	// fetched says the bundle was read this pass; unread says why it
	// could not be, nil when it was.
	fetched bool
	unread  error
	rings   map[types.NamespacedName]*pullengine.Keyring
	errs    map[types.NamespacedName]error
	// pending are the secrets not in the bundle yet, this pass.
	pending map[types.NamespacedName]bool
}

// bundleGrace is how long a secret missing from the bundle counts as on
// its way: the controller seals a node's bundle as soon as it sees an
// ImageWarm select the node (or the agent's new key), and the agent may
// see the ImageWarm first. Meanwhile pulls that need it wait (a pull
// without it would fail and start a back-off); after it, the missing
// secret is reported and the pull goes ahead without it.
const bundleGrace = 30 * time.Second

// pendingRetry is how soon a pass comes back while a pull waits for the
// bundle.
const pendingRetry = 2 * time.Second

// errNotSealed marks a secret not (yet) in a bundle this agent can open:
// no bundle, one sealed to an earlier key, or one without the secret.
var errNotSealed = errors.New("not sealed yet")

// keyring merges the keyrings of the named secrets, in order; secrets that
// cannot be used are skipped (see outcomes). wait is true when a secret
// is still on its way: the pull should wait for it.
func (s *secretKeyrings) keyring(ctx context.Context, names []types.NamespacedName) (ring *pullengine.Keyring, wait bool) {
	if len(names) == 0 {
		return nil, false
	}
	rings := make([]*pullengine.Keyring, 0, len(names))
	for _, nn := range names {
		if k := s.get(ctx, nn); k != nil {
			rings = append(rings, k)
		}
		wait = wait || s.pending[nn]
	}
	return pullengine.MergeKeyrings(rings...), wait
}

func (s *secretKeyrings) get(ctx context.Context, nn types.NamespacedName) *pullengine.Keyring {
	if k, ok := s.rings[nn]; ok {
		return k
	}
	if _, failed := s.errs[nn]; failed || s.pending[nn] {
		return nil
	}
	s.fetch(ctx)
	k, err := s.entry(nn)
	if s.waits(nn, err) {
		return nil
	}
	if err != nil {
		s.note(nn, err)
	}
	if k != nil && k.Len() > 0 {
		s.rings[nn] = k // a secret with some bad entries still lends its good ones
		return k
	}
	return nil
}

func (s *secretKeyrings) note(nn types.NamespacedName, err error) {
	if s.errs == nil {
		s.errs = map[types.NamespacedName]error{}
	}
	s.errs[nn] = err
}

// waits says whether nn is within its grace: missing from the bundle
// since less than bundleGrace.
func (s *secretKeyrings) waits(nn types.NamespacedName, err error) bool {
	if s.held.missing == nil {
		s.held.missing = map[types.NamespacedName]time.Time{}
	}
	if !errors.Is(err, errNotSealed) {
		delete(s.held.missing, nn)
		return false
	}
	first, seen := s.held.missing[nn]
	if !seen {
		first = s.now
		s.held.missing[nn] = first
	}
	if s.now.Sub(first) >= bundleGrace {
		return false
	}
	if s.pending == nil {
		s.pending = map[types.NamespacedName]bool{}
	}
	s.pending[nn] = true
	return true
}

// fetch reads and opens the node's bundle, once a pass. A bundle that
// opens replaces the one held; otherwise the one held stays.
func (s *secretKeyrings) fetch(ctx context.Context) {
	if s.fetched {
		return
	}
	s.fetched = true
	b, err := s.open(ctx)
	if err != nil {
		s.unread = err
		return
	}
	s.held.bundle = b
}

func (s *secretKeyrings) open(ctx context.Context) (*credbundle.Bundle, error) {
	var sec corev1.Secret
	err := s.reader.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: credbundle.Name(s.node)}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: node %q has no credential bundle in %q", errNotSealed, s.node, s.ns)
	case err != nil:
		return nil, fmt.Errorf("reading node %q's credential bundle: %w", s.node, err)
	}
	if node, ok := credbundle.NodeOf(&sec); !ok || node != s.node {
		return nil, fmt.Errorf("the credential bundle of node %q in %q is not warmer's", s.node, s.ns)
	}
	if sec.Annotations[credbundle.KeyAnnotation] != credbundle.Fingerprint(s.key.Public()) {
		return nil, fmt.Errorf("%w: the credential bundle of node %q is sealed to an earlier key of its agent", errNotSealed, s.node)
	}
	b, err := s.key.Open(s.node, sec.Data[credbundle.DataKey])
	if err != nil {
		return nil, fmt.Errorf("the credential bundle of node %q: %w", s.node, err)
	}
	return b, nil
}

// entry turns the bundle's entry for one secret into a keyring. Errors
// name the secret and the problem, never its content; a keyring may come
// back beside an error when only some entries were bad.
func (s *secretKeyrings) entry(nn types.NamespacedName) (*pullengine.Keyring, error) {
	e, ok := s.held.bundle.Entry(nn)
	if !ok {
		return nil, s.notHeld(nn)
	}
	if e.Problem != "" {
		return nil, errors.New(e.Problem)
	}
	k := pullengine.NewKeyring()
	if err := k.AddSecret(string(e.Type), e.Data); err != nil {
		return k, fmt.Errorf("pull secret %q: %w", nn.Name, err)
	}
	return k, nil
}

// notHeld says why nn is not in the bundle held: the bundle could not be
// read or opened, or it does not name nn (yet).
func (s *secretKeyrings) notHeld(nn types.NamespacedName) error {
	cause := s.unread
	if cause == nil {
		cause = fmt.Errorf("%w: the credential bundle of node %q does not hold it", errNotSealed, s.node)
	}
	if errors.Is(cause, errNotSealed) {
		return fmt.Errorf("pull secret %q of namespace %q is not in this node's credential bundle after %v (%w); is warmer's controller running?",
			nn.Name, nn.Namespace, bundleGrace, cause)
	}
	return fmt.Errorf("pull secret %q of namespace %q: %w", nn.Name, nn.Namespace, cause)
}

// outcomes says, per secret read in this pass, what is wrong with it: ""
// when it could be used.
func (s *secretKeyrings) outcomes() map[types.NamespacedName]string {
	out := make(map[types.NamespacedName]string, len(s.rings)+len(s.errs))
	for nn := range s.rings {
		out[nn] = ""
	}
	for nn, err := range s.errs {
		out[nn] = err.Error()
	}
	return out
}
