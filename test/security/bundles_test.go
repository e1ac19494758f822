package security

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestCredentialBundles: the controller seals each node's pull credentials
// to the key its agent publishes, and only that agent can use them. A real
// node (real agent, token bound to its node, containerd, a registry with
// auth) warms a private image through its bundle. The test plays the agent
// of a second node, node-x, with that agent's identity (the agent's
// service account with node-x's name in the token's extra): it publishes
// its own key, and finds no bundle while no ImageWarm selects node-x, then
// one that opens to exactly the selecting ImageWarm's secret; it cannot
// open the real node's bundle, nor set the real node's key. Then the
// controller is stopped and the real node's bundle deleted: the agent,
// holding what it opened, still pulls a second private image needing the
// same secret.
func TestCredentialBundles(t *testing.T) {
	const sel, other = "node-bundle", "node-x"
	regs := testbed.StartRegistries(t)
	user, pass := regs.Auth.Username(), regs.Auth.Password()
	f := testbed.StartFleet(t, map[string]map[string]string{sel: {"pool": "private"}}, testbed.FleetOptions{})
	ctx := context.Background()
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsA}})
	f.CP.LendPullSecrets(t, nsA)
	small := testbed.ImageOptions{LayerSize: 64 << 10}
	first := regs.Auth.PushRandom(t, "private/bundle-first:v1", small).Ref
	second := regs.Auth.PushRandom(t, "private/bundle-second:v1", small).Ref
	f.Create(t, build.DockerConfigSecret(nsA, "regcred", regs.Auth.Host, user, pass))
	f.Create(t, build.DockerConfigSecret(nsA, "unused", regs.Auth.Host, user, "not-named-by-any-imagewarm"))
	warm := warmWith(nsA, "bundled", "regcred", first)
	build.MatchLabel("pool", "private")(warm)
	f.Create(t, warm)

	t.Run("a selected node warms a private image through its bundle", func(t *testing.T) {
		testbed.Eventually(t, 90*time.Second, "first private image", func() error { return f.Nodes[sel].AllPresent(t, first) })
		nw, err := f.NodeWarm(sel)
		if err != nil || nw.Status.CredentialKey == nil {
			t.Fatalf("the real agent's NodeWarm: %v, key %v; want its key published", err, nw)
		}
	})

	f.CP.CreateNode(t, other, nil)
	agentX := f.CP.ImpersonateAgent(t, other)
	keyX, err := credbundle.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	nwX := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: other}}
	if err := agentX.Create(ctx, nwX); err != nil {
		t.Fatalf("node-x's agent creating its NodeWarm: %v", err)
	}
	nwX.Status.CredentialKey = ptr.To(keyX.Public())
	if err := agentX.Status().Update(ctx, nwX); err != nil {
		t.Fatalf("node-x's agent publishing its key: %v", err)
	}
	bundleOf := func(node string) (*corev1.Secret, error) {
		var s corev1.Secret
		err := agentX.Get(ctx, types.NamespacedName{Namespace: testbed.SystemNamespace, Name: credbundle.Name(node)}, &s)
		return &s, err
	}

	t.Run("an agent of a node no ImageWarm selects gets no bundle", func(t *testing.T) {
		// The controller seals within seconds of a key (its NodeWarm
		// watch); give it ample time to do the wrong thing.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := bundleOf(other); !apierrors.IsNotFound(err) {
				t.Fatalf("node-x's bundle: %v; want none", err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
	t.Run("selected, its bundle opens to exactly its ImageWarms' secrets", func(t *testing.T) {
		var n corev1.Node
		if err := f.CP.Client.Get(ctx, types.NamespacedName{Name: other}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels["pool"] = "private"
		if err := f.CP.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "node-x's bundle", func() error {
			s, err := bundleOf(other)
			if err != nil {
				return err
			}
			b, err := keyX.Open(other, s.Data[credbundle.DataKey])
			if err != nil {
				return err
			}
			e, ok := b.Entry(types.NamespacedName{Namespace: nsA, Name: "regcred"})
			if len(b.Secrets) != 1 || !ok || !strings.Contains(string(e.Data[corev1.DockerConfigJsonKey]), user) {
				return fmt.Errorf("node-x's bundle holds %d secrets (regcred: %v); want exactly team-a/regcred's login", len(b.Secrets), ok)
			}
			return nil
		})
	})
	t.Run("it cannot open another node's bundle", func(t *testing.T) { testSealedApart(t, agentX, keyX, sel, other) })
	t.Run("it cannot set another node's key", func(t *testing.T) { testKeyOwnNodeOnly(t, agentX, keyX, sel, other) })
	t.Run("the controller down, held credentials still pull", func(t *testing.T) {
		f.Controller.Stop()
		if err := f.CP.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testbed.SystemNamespace, Name: credbundle.Name(sel)}}); err != nil {
			t.Fatalf("deleting %s's bundle: %v", sel, err)
		}
		f.Create(t, func() *warmv1.ImageWarm {
			w := warmWith(nsA, "bundled-second", "regcred", second)
			build.MatchLabel("pool", "private")(w)
			return w
		}())
		testbed.Eventually(t, 90*time.Second, "second private image", func() error { return f.Nodes[sel].AllPresent(t, second) })
	})
}

// testSealedApart: the agent of node other reads node sel's bundle (RBAC
// allows it) and cannot open it, with its key or under its name.
func testSealedApart(t *testing.T, agent client.Client, key *credbundle.KeyPair, sel, other string) {
	var s corev1.Secret
	if err := agent.Get(context.Background(), types.NamespacedName{Namespace: testbed.SystemNamespace, Name: credbundle.Name(sel)}, &s); err != nil {
		t.Fatalf("reading %s's bundle as %s's agent: %v (RBAC allows it; the seal is what protects)", sel, other, err)
	}
	if _, err := key.Open(sel, s.Data[credbundle.DataKey]); !errors.Is(err, credbundle.ErrNotOpened) {
		t.Errorf("%s's key opening %s's bundle: %v; want ErrNotOpened", other, sel, err)
	}
	if _, err := key.Open(other, s.Data[credbundle.DataKey]); !errors.Is(err, credbundle.ErrNotOpened) {
		t.Errorf("%s's bundle opened as %s's: %v; want ErrNotOpened", sel, other, err)
	}
}

// testKeyOwnNodeOnly: the agent of node other cannot publish its key as
// node sel's, which would have sel's credentials sealed to it.
func testKeyOwnNodeOnly(t *testing.T, agent client.Client, key *credbundle.KeyPair, sel, other string) {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"credentialKey":{"kem":32,"publicKey":%q}}}`,
		base64.StdEncoding.EncodeToString(key.Public().PublicKey)))
	err := agent.Status().Patch(context.Background(), &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: sel}}, patch)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(fmt.Sprint(err), "may write only NodeWarm "+other) {
		t.Errorf("%s's agent setting %s's key: %v; want refused by warmer-agent-own-nodewarm", other, sel, err)
	}
}
