package pullsecrets

import (
	"context"
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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/secretcopy"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const ns = secretcopy.DefaultNamespace

// TestCopier runs the copier on a real API server as the controller's
// ServiceAccount, with only the shipped roles (config/rbac): team-a opted
// in with a RoleBinding, team-b did not.
func TestCopier(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	ctx := t.Context()
	for _, n := range []string{ns, "team-a", "team-b"} {
		create(t, cp.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	if out, err := cp.Kubectl(t, "apply", "-k", filepath.Join(testbed.RepoRoot(t), "config", "rbac")); err != nil {
		t.Fatalf("applying config/rbac: %v\n%s", err, out)
	}
	cp.LendPullSecrets(t, "team-a")

	regcred := build.DockerConfigSecret("team-a", "regcred", "reg.example", "alice", "first")
	regcred.Data["notes"] = []byte("not for the nodes")
	create(t, cp.Client, regcred)
	create(t, cp.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "opaque"},
		Data: map[string][]byte{"password": []byte("x")}})
	create(t, cp.Client, build.DockerConfigSecret("team-b", "regcred", "reg.example", "bob", "second"))
	warmA := build.ImageWarm("team-a", "a", build.Images("reg.example/a:1"))
	warmA.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}, {Name: "opaque"}, {Name: "missing"}}
	create(t, cp.Client, warmA)
	warmB := build.ImageWarm("team-b", "b", build.Images("reg.example/b:1"))
	warmB.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	create(t, cp.Client, warmB)

	startCopier(t, cp.AddUser(t, "system:serviceaccount:"+ns+":warmer-controller"))
	copyOf := func(namespace, name string) (*corev1.Secret, error) {
		var s corev1.Secret
		err := cp.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: secretcopy.Name(types.NamespacedName{Namespace: namespace, Name: name})}, &s)
		return &s, err
	}
	wantProblem := func(namespace, name, problem string) func() error {
		return func() error {
			s, err := copyOf(namespace, name)
			if err != nil {
				return err
			}
			if got := s.Annotations[secretcopy.Problem]; !strings.Contains(got, problem) || len(s.Data) != 0 {
				return fmt.Errorf("placeholder of %s/%s: problem %q, %d keys; want %q, none", namespace, name, got, len(s.Data), problem)
			}
			return nil
		}
	}
	wantLogin := func(namespace, name, password string) func() error {
		return func() error {
			s, err := copyOf(namespace, name)
			if err != nil {
				return err
			}
			if s.Type != corev1.SecretTypeDockerConfigJson || len(s.Data) != 1 || !strings.Contains(string(s.Data[corev1.DockerConfigJsonKey]), password) {
				return fmt.Errorf("copy of %s/%s: type %s, keys %d, %s", namespace, name, s.Type, len(s.Data), s.Annotations[secretcopy.Problem])
			}
			return nil
		}
	}

	t.Run("a pull secret is copied with only the key a pull reads", func(t *testing.T) {
		testbed.Eventually(t, 30*time.Second, "copy of team-a/regcred", wantLogin("team-a", "regcred", "first"))
	})
	t.Run("what cannot be copied is said in a placeholder", func(t *testing.T) {
		testbed.Eventually(t, 30*time.Second, "placeholders", func() error {
			if err := wantProblem("team-a", "opaque", `has type "Opaque"`)(); err != nil {
				return err
			}
			if err := wantProblem("team-a", "missing", `not found in namespace "team-a"`)(); err != nil {
				return err
			}
			return wantProblem("team-b", "regcred", "bind ClusterRole "+ReaderRole)()
		})
	})
	t.Run("a copy follows its source", func(t *testing.T) {
		regcred.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"reg.example":{"username":"alice","password":"rotated"}}}`)
		if err := cp.Client.Update(ctx, regcred); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "rotated copy", wantLogin("team-a", "regcred", "rotated"))
	})
	t.Run("a namespace that opts in gets its copy", func(t *testing.T) {
		cp.LendPullSecrets(t, "team-b")
		testbed.Eventually(t, 30*time.Second, "copy of team-b/regcred", wantLogin("team-b", "regcred", "second"))
	})
	t.Run("a stray copy goes", func(t *testing.T) {
		stray := secretcopy.Placeholder(types.NamespacedName{Namespace: "team-c", Name: "x"}, ns, "stray")
		stray.Name = "warmer-pull-not-a-hash"
		create(t, cp.Client, stray)
		testbed.Eventually(t, 30*time.Second, "stray deleted", func() error {
			return gone(cp.Client.Get(ctx, client.ObjectKeyFromObject(stray), &corev1.Secret{}))
		})
	})
	t.Run("copies go with the last ImageWarm naming them", func(t *testing.T) {
		if err := cp.Client.Delete(ctx, warmA); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 30*time.Second, "team-a copies deleted", func() error {
			for _, n := range []string{"regcred", "opaque", "missing"} {
				_, err := copyOf("team-a", n)
				if err := gone(err); err != nil {
					return fmt.Errorf("copy of team-a/%s: %w", n, err)
				}
			}
			return nil
		})
	})
	t.Run("the agent reads copies and no other Secret", func(t *testing.T) {
		agent, err := client.New(cp.AddUser(t, "system:serviceaccount:"+ns+":warmer-agent"), client.Options{Scheme: testbed.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		key := types.NamespacedName{Namespace: ns, Name: secretcopy.Name(types.NamespacedName{Namespace: "team-b", Name: "regcred"})}
		if err := agent.Get(ctx, key, &corev1.Secret{}); err != nil {
			t.Errorf("agent reading a copy: %v", err)
		}
		if err := agent.Get(ctx, types.NamespacedName{Namespace: "team-b", Name: "regcred"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Errorf("agent reading team-b/regcred: %v; want Forbidden", err)
		}
		if err := agent.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
			t.Errorf("agent listing copies: %v; want Forbidden", err)
		}
	})
}

// startCopier runs the copier in a manager as the given user, with the
// controller's Secret cache restriction, resyncing every second.
func startCopier(t *testing.T, cfg *rest.Config) {
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
	c := &Copier{Namespace: ns, Resync: time.Second}
	if err := c.SetupWithManager(mgr); err != nil {
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
