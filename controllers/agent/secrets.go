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

	"github.com/warmer-dev/warmer/internal/secretcopy"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// secretKeyrings reads pull secrets for one reconcile pass, each at most
// once. The agent reads not the secret an ImageWarm names but the
// controller's copy of it in warmer's namespace (secretcopy), the only
// namespace whose Secrets its Role lets it read. Copies are read with a
// plain GET through an uncached reader: an agent on every node must not
// hold every pull secret in memory. Only images that need pulling cause
// reads, so a warm node reads none.
type secretKeyrings struct {
	reader client.Reader
	// ns is the namespace of the copies.
	ns    string
	rings map[types.NamespacedName]*pullengine.Keyring
	errs  map[types.NamespacedName]error
	// missing is when each secret's copy was first found missing, kept
	// across passes (carried.copyMissing); now is the pass's time.
	missing map[types.NamespacedName]time.Time
	now     time.Time
	// pending are the secrets whose copies are not there yet, this pass.
	pending map[types.NamespacedName]bool
}

// copyGrace is how long a missing copy counts as on its way: the
// controller copies a secret as soon as an ImageWarm names it, and the
// agent may see the ImageWarm first. Meanwhile pulls that need it wait
// (a pull without it would fail and start a back-off); after it, the
// missing copy is reported and the pull goes ahead without it.
const copyGrace = 30 * time.Second

// pendingRetry is how soon a pass comes back while a pull waits for a
// copy.
const pendingRetry = 2 * time.Second

func newSecretKeyrings(r client.Reader, ns string, missing map[types.NamespacedName]time.Time, now time.Time) *secretKeyrings {
	return &secretKeyrings{reader: r, ns: ns, rings: map[types.NamespacedName]*pullengine.Keyring{}, errs: map[types.NamespacedName]error{},
		missing: missing, now: now, pending: map[types.NamespacedName]bool{}}
}

// keyring merges the keyrings of the named secrets, in order; secrets that
// cannot be used are skipped (see outcomes). wait is true when a copy is
// still on its way: the pull should wait for it.
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
	k, err := s.read(ctx, nn)
	if errors.Is(err, errNotCopied) {
		first, seen := s.missing[nn]
		if !seen {
			first = s.now
			s.missing[nn] = first
		}
		if s.now.Sub(first) < copyGrace {
			s.pending[nn] = true
			return nil
		}
	} else {
		delete(s.missing, nn)
	}
	if err != nil {
		s.errs[nn] = err
	}
	if k != nil && k.Len() > 0 {
		s.rings[nn] = k // a secret with some bad entries still lends its good ones
		return k
	}
	return nil
}

// errNotCopied is a copy not found.
var errNotCopied = errors.New("not copied")

// read turns the copy of one secret into a keyring. Errors name the
// secret and the problem, never its content; a keyring may come back
// beside an error when only some entries were bad.
func (s *secretKeyrings) read(ctx context.Context, nn types.NamespacedName) (*pullengine.Keyring, error) {
	var sec corev1.Secret
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: secretcopy.Name(nn)}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: pull secret %q of namespace %q has no copy in %q after %v; is warmer's controller running?",
				errNotCopied, nn.Name, nn.Namespace, s.ns, copyGrace)
		}
		return nil, fmt.Errorf("reading the copy of pull secret %q: %w", nn.Name, err)
	}
	if src, ok := secretcopy.Source(&sec); !ok || src != nn {
		return nil, fmt.Errorf("the copy of pull secret %q in %q is not warmer's copy of it", nn.Name, s.ns)
	}
	if problem := sec.Annotations[secretcopy.Problem]; problem != "" {
		return nil, errors.New(problem)
	}
	k := pullengine.NewKeyring()
	if err := k.AddSecret(string(sec.Type), sec.Data); err != nil {
		return k, fmt.Errorf("pull secret %q: %w", nn.Name, err)
	}
	return k, nil
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
