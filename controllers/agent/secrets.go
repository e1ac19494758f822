package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// secretKeyrings reads pull secrets for one reconcile pass, each at most
// once. Secrets are read with a plain GET through an uncached reader: an
// agent on every node must not list or watch every Secret in the cluster.
// Only images that need pulling cause reads, so a warm node reads none.
type secretKeyrings struct {
	reader client.Reader
	rings  map[types.NamespacedName]*pullengine.Keyring
	errs   map[types.NamespacedName]error
}

func newSecretKeyrings(r client.Reader) *secretKeyrings {
	return &secretKeyrings{reader: r, rings: map[types.NamespacedName]*pullengine.Keyring{}, errs: map[types.NamespacedName]error{}}
}

// keyring merges the keyrings of the named secrets, in order; secrets that
// cannot be used are skipped (see problems).
func (s *secretKeyrings) keyring(ctx context.Context, names []types.NamespacedName) *pullengine.Keyring {
	if len(names) == 0 {
		return nil
	}
	rings := make([]*pullengine.Keyring, 0, len(names))
	for _, nn := range names {
		if k := s.get(ctx, nn); k != nil {
			rings = append(rings, k)
		}
	}
	return pullengine.MergeKeyrings(rings...)
}

func (s *secretKeyrings) get(ctx context.Context, nn types.NamespacedName) *pullengine.Keyring {
	if k, ok := s.rings[nn]; ok {
		return k
	}
	if _, failed := s.errs[nn]; failed {
		return nil
	}
	k, err := s.read(ctx, nn)
	if err != nil {
		s.errs[nn] = err
	}
	if k != nil && k.Len() > 0 {
		s.rings[nn] = k // a secret with some bad entries still lends its good ones
		return k
	}
	return nil
}

// read turns one secret into a keyring. Errors name the secret and the
// problem, never its content; a keyring may come back beside an error when
// only some entries were bad.
func (s *secretKeyrings) read(ctx context.Context, nn types.NamespacedName) (*pullengine.Keyring, error) {
	var sec corev1.Secret
	if err := s.reader.Get(ctx, nn, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pull secret %q not found in namespace %q", nn.Name, nn.Namespace)
		}
		return nil, fmt.Errorf("reading pull secret %q: %w", nn.Name, err)
	}
	switch sec.Type {
	case corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg:
	default:
		return nil, fmt.Errorf("pull secret %q has type %q; want %s or %s", nn.Name, sec.Type,
			corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
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
