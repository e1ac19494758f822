package agent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// TestBundleOnItsWay: a pull waits for a secret the controller has not
// sealed into the node's bundle yet, for bundleGrace; then the missing
// secret is reported and the pull goes ahead without it. A bundle that
// arrives is opened and used, a problem sealed in it is reported as it
// is, a bundle sealed to an earlier key counts as on its way, and what
// was opened is kept when the bundle goes. (A fake client: the timing is
// the logic under test; the real controller and agent are in
// controllers/pullsecrets and test/security.)
func TestBundleOnItsWay(t *testing.T) {
	const ns, node = "warmer-system", "node-a"
	src := types.NamespacedName{Namespace: "team", Name: "regcred"}
	bad := types.NamespacedName{Namespace: "team", Name: "opaque"}
	c := fake.NewClientBuilder().Build()
	key, old := mustKeyPair(t), mustKeyPair(t)
	var held heldCredentials
	t0 := time.Now()
	pass := func(at time.Duration, names ...types.NamespacedName) (bool, map[types.NamespacedName]string) {
		s := &secretKeyrings{reader: c, ns: ns, node: node, key: key, held: &held, now: t0.Add(at), rings: map[types.NamespacedName]*pullengine.Keyring{}}
		_, wait := s.keyring(t.Context(), names)
		return wait, s.outcomes()
	}
	if wait, out := pass(0, src); !wait || len(out) != 0 {
		t.Fatalf("no bundle yet: wait %v, outcomes %v; want a wait and nothing reported", wait, out)
	}
	put(t, c, sealFor(t, ns, node, old, nil))
	if wait, _ := pass(bundleGrace/2, src); !wait {
		t.Fatal("a bundle for the earlier key, within the grace: want a wait")
	}
	wait, out := pass(bundleGrace, src)
	if wait || !strings.Contains(out[src], "earlier key") || !strings.Contains(out[src], "is not in this node's credential bundle") {
		t.Fatalf("after the grace: wait %v, outcomes %v; want the stale bundle reported", wait, out)
	}
	var b credbundle.Bundle
	b.Put(src, credbundle.EntryOf(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{
			corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.example":{"username":"u","password":"p"}}}`)}}))
	b.Put(bad, credbundle.Problem(`pull secret "opaque" has type "Opaque"`))
	put(t, c, sealFor(t, ns, node, key, &b))
	wait, out = pass(bundleGrace+time.Second, src, bad)
	if wait || out[src] != "" || !strings.Contains(out[bad], `has type "Opaque"`) {
		t.Fatalf("bundle sealed: wait %v, outcomes %v; want the secret used and the sealed problem", wait, out)
	}
	if _, still := held.missing[src]; still {
		t.Error("a secret found is still remembered as missing")
	}
	if err := c.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credbundle.Name(node)}}); err != nil {
		t.Fatal(err)
	}
	if wait, out = pass(bundleGrace+2*time.Second, src); wait || out[src] != "" {
		t.Fatalf("bundle gone after it was opened: wait %v, outcomes %v; want the held secret used", wait, out)
	}
}

// TestBundleOfAnotherNode: node B's bundle put under node A's name does
// not open for A's agent, and says so without content.
func TestBundleOfAnotherNode(t *testing.T) {
	const ns = "warmer-system"
	src := types.NamespacedName{Namespace: "team", Name: "regcred"}
	key := mustKeyPair(t)
	var b credbundle.Bundle
	b.Put(src, credbundle.Problem("sealed for B"))
	stolen := sealFor(t, ns, "node-b", key, &b)
	stolen.Name = credbundle.Name("node-a")
	stolen.Annotations[credbundle.NodeAnnotation] = "node-a"
	c := fake.NewClientBuilder().WithObjects(stolen).Build()
	s := &secretKeyrings{reader: c, ns: ns, node: "node-a", key: key, held: &heldCredentials{}, now: time.Now(), rings: map[types.NamespacedName]*pullengine.Keyring{}}
	if _, wait := s.keyring(t.Context(), []types.NamespacedName{src}); wait {
		t.Fatal("waits for a bundle that will not open")
	}
	if got := s.outcomes()[src]; !strings.Contains(got, "does not open") || strings.Contains(got, "sealed for B") {
		t.Errorf("outcome %q; want it to say the bundle does not open, without its content", got)
	}
}

func mustKeyPair(t *testing.T) *credbundle.KeyPair {
	t.Helper()
	k, err := credbundle.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sealFor(t *testing.T, ns, node string, key *credbundle.KeyPair, b *credbundle.Bundle) *corev1.Secret {
	t.Helper()
	if b == nil {
		b = &credbundle.Bundle{}
	}
	sealed, err := credbundle.Seal(node, key.Public(), b)
	if err != nil {
		t.Fatal(err)
	}
	return credbundle.Secret(ns, node, credbundle.Fingerprint(key.Public()), "test", sealed)
}

func put(t *testing.T, c client.Client, s *corev1.Secret) {
	t.Helper()
	if err := c.Delete(t.Context(), s.DeepCopy()); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

// TestBundleBadInput: what the agent makes of each bundle it may find,
// past the grace (docs/reliability.md, "Credential bundles"). Each row
// names the pull secret team/regcred.
func TestBundleBadInput(t *testing.T) {
	const ns, node = "warmer-system", "node-a"
	src := types.NamespacedName{Namespace: "team", Name: "regcred"}
	key, old := mustKeyPair(t), mustKeyPair(t)
	with := func(e credbundle.Entry) *credbundle.Bundle {
		var b credbundle.Bundle
		b.Put(src, e)
		return &b
	}
	tampered := sealFor(t, ns, node, key, with(credbundle.Problem("x")))
	tampered.Data[credbundle.DataKey][40] ^= 1
	for _, tc := range []struct {
		name   string
		bundle *corev1.Secret // nil: none
		want   string
	}{
		{"no key published yet: no bundle", nil, `is not in this node's credential bundle after 30s (not sealed yet: node "node-a" has no credential bundle`},
		{"a bundle for a stale key", sealFor(t, ns, node, old, with(credbundle.Problem("x"))), "sealed to an earlier key of its agent"},
		{"a bundle without the secret", sealFor(t, ns, node, key, nil), `the credential bundle of node "node-a" does not hold it`},
		{"a secret not opted in", sealFor(t, ns, node, key, with(credbundle.Problem(`warmer may not read pull secret "regcred" of namespace "team": bind ClusterRole warmer-controller-pull-secrets`))),
			`warmer may not read pull secret "regcred"`},
		{"a secret narrowed away by resourceNames", sealFor(t, ns, node, key, with(credbundle.Problem(`warmer may not read pull secret "regcred" of namespace "team": ... or a Role granting get on this Secret by name`))),
			"a Role granting get on this Secret by name"},
		{"a tampered bundle", tampered, "does not open with this agent's key"},
		{"a Secret of that name not written by warmer", func() *corev1.Secret {
			s := sealFor(t, ns, node, key, nil)
			delete(s.Labels, credbundle.Label)
			return s
		}(), "is not warmer's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if tc.bundle != nil {
				b = b.WithObjects(tc.bundle.DeepCopy())
			}
			held := &heldCredentials{missing: map[types.NamespacedName]time.Time{src: time.Now().Add(-bundleGrace)}}
			s := &secretKeyrings{reader: b.Build(), ns: ns, node: node, key: key, held: held, now: time.Now(), rings: map[types.NamespacedName]*pullengine.Keyring{}}
			ring, wait := s.keyring(t.Context(), []types.NamespacedName{src})
			if got := s.outcomes()[src]; wait || ring.Len() != 0 || !strings.Contains(got, tc.want) {
				t.Errorf("wait %v, %d credentials, outcome %q; want no wait, none, and %q", wait, ring.Len(), got, tc.want)
			}
		})
	}
}
