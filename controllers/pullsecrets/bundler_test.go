package pullsecrets

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const ns = credbundle.DefaultNamespace

// TestBundler runs the bundler on a real API server as the controller's
// ServiceAccount, with only the shipped roles (config/rbac): team-a opted
// in with a RoleBinding, team-b did not, team-c opted in only its Secret
// "allowed" (a Role with resourceNames).
func TestBundler(t *testing.T) {
	b := startBundlerBed(t)
	cp, ctx := b.cp, t.Context()
	teamA := map[string]string{
		"team-a/regcred": "login:first",
		"team-a/opaque":  `problem:has type "Opaque"`,
		"team-a/missing": `problem:not found in namespace "team-a"`,
	}
	gpu := map[string]string{
		"team-b/regcred": "problem:bind ClusterRole " + ReaderRole,
		"team-c/allowed": "login:third",
		"team-c/other":   `problem:warmer may not read pull secret "other" of namespace "team-c"`,
	}
	for k, v := range teamA {
		gpu[k] = v
	}

	t.Run("a selected node's bundle opens to exactly its ImageWarms' secrets", func(t *testing.T) {
		testbed.Eventually(t, 30*time.Second, "bundle of gpu-1", b.holds("gpu-1", gpu))
		testbed.Eventually(t, 30*time.Second, "bundle of plain-1", b.holds("plain-1", teamA))
	})
	t.Run("a node no ImageWarm selects, or with no key published yet, has no bundle", func(t *testing.T) {
		consistently(t, 3*time.Second, "no bundle for cp-1 nor old-agent", func() error {
			for _, node := range []string{"cp-1", "old-agent"} {
				err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: credbundle.Name(node)}, &corev1.Secret{})
				if gone(err) != nil {
					return fmt.Errorf("%s: %w", node, gone(err))
				}
			}
			return nil
		})
	})
	t.Run("a bundle does not open with another node's key or name", b.testSealedApart)
	t.Run("an unchanged bundle is not written again", b.testUnchanged)
	t.Run("a bundle follows its sources", func(t *testing.T) {
		b.regcred.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"reg.example":{"username":"alice","password":"rotated"}}}`)
		if err := cp.Client.Update(ctx, b.regcred); err != nil {
			t.Fatal(err)
		}
		teamA["team-a/regcred"] = "login:rotated"
		testbed.Eventually(t, 30*time.Second, "rotated in plain-1's bundle", b.holds("plain-1", teamA))
	})
	t.Run("a new key is sealed to at once", func(t *testing.T) {
		b.keys["plain-1"] = publishKey(t, cp.Client, "plain-1", nil)
		testbed.Eventually(t, 10*time.Second, "plain-1 sealed to its new key", b.holds("plain-1", teamA))
	})
	t.Run("the copies of an earlier release go once every agent publishes a key", b.testLegacyCopies)
	t.Run("a bundle goes with its NodeWarm, and when nothing selects the node", func(t *testing.T) {
		if err := cp.Client.Delete(ctx, &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}); err != nil {
			t.Fatal(err)
		}
		if err := cp.Client.Delete(ctx, b.warmA); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "bundles deleted", func() error {
			for _, node := range []string{"gpu-1", "plain-1"} {
				if _, _, err := b.open(node); gone(err) != nil {
					return fmt.Errorf("bundle of %s: %w", node, gone(err))
				}
			}
			return nil
		})
	})
	t.Run("the agent reads bundles and no other Secret", b.testAgentReads)
}

// bundlerBed is TestBundler's cluster: a real API server with the shipped
// roles, three teams' secrets and ImageWarms, nodes with published keys,
// and the bundler running as the controller's ServiceAccount.
type bundlerBed struct {
	cp       *testbed.ControlPlane
	keys     map[string]*credbundle.KeyPair
	regcred  *corev1.Secret
	warmA    *warmv1.ImageWarm
	legacy   *corev1.Secret
	oldAgent *warmv1.NodeWarm
}

func startBundlerBed(t *testing.T) *bundlerBed {
	cp := testbed.StartControlPlane(t)
	b := &bundlerBed{cp: cp, keys: map[string]*credbundle.KeyPair{}}
	for _, n := range []string{ns, "team-a", "team-b", "team-c"} {
		create(t, cp.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	if out, err := cp.Kubectl(t, "apply", "-k", filepath.Join(testbed.RepoRoot(t), "config", "rbac")); err != nil {
		t.Fatalf("applying config/rbac: %v\n%s", err, out)
	}
	cp.LendPullSecrets(t, "team-a")
	cp.LendNamedPullSecrets(t, "team-c", "allowed")

	b.regcred = build.DockerConfigSecret("team-a", "regcred", "reg.example", "alice", "first")
	b.regcred.Data["notes"] = []byte("not for the nodes")
	create(t, cp.Client, b.regcred)
	create(t, cp.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "opaque"},
		Data: map[string][]byte{"password": []byte("x")}})
	create(t, cp.Client, build.DockerConfigSecret("team-b", "regcred", "reg.example", "bob", "second"))
	create(t, cp.Client, build.DockerConfigSecret("team-c", "allowed", "reg.example", "carol", "third"))
	create(t, cp.Client, build.DockerConfigSecret("team-c", "other", "reg.example", "carol", "narrowed-away"))
	b.warmA = warmNaming("team-a", "a", nil, "regcred", "opaque", "missing")
	create(t, cp.Client, b.warmA)
	create(t, cp.Client, warmNaming("team-b", "b", build.MatchLabel("pool", "gpu"), "regcred"))
	create(t, cp.Client, warmNaming("team-c", "c", build.MatchLabel("pool", "gpu"), "allowed", "other"))

	for node, labels := range map[string]map[string]string{
		"gpu-1": {"pool": "gpu"}, "plain-1": {}, "cp-1": {"node-role.kubernetes.io/control-plane": ""},
	} {
		b.keys[node] = publishKey(t, cp.Client, node, labels)
	}
	legacyInterval = 200 * time.Millisecond
	b.legacy = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-0123",
		Labels: map[string]string{credbundle.LegacyCopyLabel: "true"}}, Data: map[string][]byte{"x": []byte("y")}}
	create(t, cp.Client, b.legacy)
	b.oldAgent = &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "old-agent"}}
	create(t, cp.Client, b.oldAgent)

	startBundler(t, cp.AddUser(t, "system:serviceaccount:"+ns+":warmer-controller"))
	return b
}

// warmNaming is an ImageWarm of one image naming the given secrets.
func warmNaming(namespace, name string, sel build.ImageWarmOption, secrets ...string) *warmv1.ImageWarm {
	opts := []build.ImageWarmOption{build.Images("reg.example/" + name + ":1")}
	if sel != nil {
		opts = append(opts, sel)
	}
	iw := build.ImageWarm(namespace, name, opts...)
	for _, s := range secrets {
		iw.Spec.ImagePullSecrets = append(iw.Spec.ImagePullSecrets, warmv1.SecretReference{Name: s})
	}
	return iw
}

// open reads node's bundle and opens it with the node's key.
func (b *bundlerBed) open(node string) (*credbundle.Bundle, *corev1.Secret, error) {
	var s corev1.Secret
	if err := b.cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: credbundle.Name(node)}, &s); err != nil {
		return nil, nil, err
	}
	opened, err := b.keys[node].Open(node, s.Data[credbundle.DataKey])
	return opened, &s, err
}

// holds checks a node's bundle: for each source, "login:<password>" or
// "problem:<part of the problem>"; and nothing else.
func (b *bundlerBed) holds(node string, want map[string]string) func() error {
	return func() error {
		opened, _, err := b.open(node)
		if err != nil {
			return err
		}
		if len(opened.Secrets) != len(want) {
			return fmt.Errorf("bundle of %s holds %d secrets; want %d", node, len(opened.Secrets), len(want))
		}
		for src, w := range want {
			e, ok := opened.Secrets[src]
			if !ok {
				return fmt.Errorf("bundle of %s lacks %s", node, src)
			}
			if err := entryIs(e, w); err != nil {
				return fmt.Errorf("bundle of %s: %s: %w", node, src, err)
			}
		}
		return nil
	}
}

func entryIs(e credbundle.Entry, want string) error {
	kind, text, _ := strings.Cut(want, ":")
	switch {
	case kind == "login" && (e.Type != corev1.SecretTypeDockerConfigJson || len(e.Data) != 1 || !strings.Contains(string(e.Data[corev1.DockerConfigJsonKey]), text)):
		return fmt.Errorf("%s with %d keys, problem %q; want the login with %s", e.Type, len(e.Data), e.Problem, text)
	case kind == "problem" && (!strings.Contains(e.Problem, text) || len(e.Data) != 0):
		return fmt.Errorf("problem %q and %d keys; want %q and none", e.Problem, len(e.Data), text)
	}
	return nil
}

func (b *bundlerBed) testSealedApart(t *testing.T) {
	_, s, err := b.open("gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.keys["plain-1"].Open("gpu-1", s.Data[credbundle.DataKey]); !errors.Is(err, credbundle.ErrNotOpened) {
		t.Errorf("gpu-1's bundle with plain-1's key: %v", err)
	}
	if _, err := b.keys["gpu-1"].Open("plain-1", s.Data[credbundle.DataKey]); !errors.Is(err, credbundle.ErrNotOpened) {
		t.Errorf("gpu-1's bundle under plain-1's name: %v", err)
	}
	for _, v := range s.Annotations {
		if strings.Contains(v, "first") || strings.Contains(v, "alice") {
			t.Errorf("an annotation shows secret content: %q", v)
		}
	}
}

func (b *bundlerBed) testUnchanged(t *testing.T) {
	_, before, err := b.open("plain-1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // three Resyncs
	_, after, err := b.open("plain-1")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("bundle of plain-1 rewritten with nothing changed: %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

func (b *bundlerBed) testLegacyCopies(t *testing.T) {
	ctx := t.Context()
	consistently(t, 2*time.Second, "copy kept while old-agent has no key", func() error {
		return b.cp.Client.Get(ctx, client.ObjectKeyFromObject(b.legacy), &corev1.Secret{})
	})
	if err := b.cp.Client.Delete(ctx, b.oldAgent); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "copy deleted", func() error {
		return gone(b.cp.Client.Get(ctx, client.ObjectKeyFromObject(b.legacy), &corev1.Secret{}))
	})
}

func (b *bundlerBed) testAgentReads(t *testing.T) {
	ctx := t.Context()
	agent, err := client.New(b.cp.AddUser(t, "system:serviceaccount:"+ns+":warmer-agent"), client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	publishKey(t, b.cp.Client, "plain-2", nil)
	create(t, b.cp.Client, warmNaming("team-a", "a2", nil, "regcred"))
	testbed.Eventually(t, 30*time.Second, "bundle of plain-2", func() error {
		return agent.Get(ctx, types.NamespacedName{Namespace: ns, Name: credbundle.Name("plain-2")}, &corev1.Secret{})
	})
	if err := agent.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "regcred"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("agent reading team-a/regcred: %v; want Forbidden", err)
	}
	if err := agent.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("agent listing bundles: %v; want Forbidden", err)
	}
}

// publishKey makes a key pair for node and publishes it in its NodeWarm,
// creating the Node and NodeWarm when missing, as the node's agent does.
func publishKey(t *testing.T, c client.Client, node string, labels map[string]string) *credbundle.KeyPair {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	nw := &warmv1.NodeWarm{}
	if err := c.Get(ctx, types.NamespacedName{Name: node}, nw); apierrors.IsNotFound(err) {
		nw = &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node}}
		create(t, c, nw)
	} else if err != nil {
		t.Fatal(err)
	}
	k, err := credbundle.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	nw.Status.CredentialKey = ptr.To(k.Public())
	if err := c.Status().Update(ctx, nw); err != nil {
		t.Fatalf("publishing the key of %s: %v", node, err)
	}
	return k
}

// startBundler runs the bundler in a manager as the given user, with the
// controller's Secret cache restriction, resyncing every second.
func startBundler(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testbed.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: CacheOptions(ns)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &Bundler{Namespace: ns, Resync: time.Second}
	if err := b.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testbed.RunManager(t, mgr)
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func gone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("still there")
	}
	return err
}

// consistently fails when check fails within d.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}
