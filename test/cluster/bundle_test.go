package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// testPrivateThroughBundle warms a private image on the real node with
// the installed agent's projected token: the namespace opts in with a
// RoleBinding, the controller seals the secret into the node's bundle to
// the key the agent published in its NodeWarm, and the agent opens it to
// pull from the registry that asks for a login. No per-secret copy is
// left in warmer's namespace.
func testPrivateThroughBundle(t *testing.T) {
	ctx := context.Background()
	const ns = "default"
	image := cloudMirrored + "/bundled/app:v1"
	authReg.PushRandom(t, "bundled/app:v1", testbed.ImageOptions{LayerSize: 256 << 10})
	secret := build.DockerConfigSecret(ns, "bundle-cred", cloudMirrored, authReg.Username(), authPassword)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "warmer-controller-pull-secrets"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: installNamespace, Name: "warmer-controller"}},
	}
	iw := build.ImageWarm(ns, "bundled", build.Images(image))
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: secret.Name}}
	for _, o := range []client.Object{secret, rb, iw} {
		if err := node.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{iw, rb, secret} {
			_ = node.Client.Delete(context.Background(), o)
		}
		removeImage(t, image)
	})
	waitImageWarmReady(t, iw.Name)

	var nw warmv1.NodeWarm
	if err := node.Client.Get(ctx, client.ObjectKey{Name: node.Name}, &nw); err != nil || nw.Status.CredentialKey == nil {
		t.Fatalf("the agent's NodeWarm: %v; want its credential key published", err)
	}
	var bundle corev1.Secret
	if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: credbundle.Name(node.Name)}, &bundle); err != nil {
		t.Fatalf("the node's credential bundle: %v", err)
	}
	if got, want := bundle.Annotations[credbundle.KeyAnnotation], credbundle.Fingerprint(*nw.Status.CredentialKey); got != want {
		t.Errorf("the bundle is sealed to key %s; the agent published %s", got, want)
	}
	var copies corev1.SecretList
	if err := node.Client.List(ctx, &copies, client.InNamespace(installNamespace), client.HasLabels{credbundle.LegacyCopyLabel}); err != nil {
		t.Fatal(err)
	}
	if len(copies.Items) != 0 {
		t.Errorf("%d per-secret copies in %s; want none", len(copies.Items), installNamespace)
	}
	poll(t, time.Minute, "the bundle gone with the last ImageWarm naming a secret", func() error {
		if err := node.Client.Delete(ctx, iw); client.IgnoreNotFound(err) != nil {
			return err
		}
		err := node.Client.Get(ctx, client.ObjectKeyFromObject(&bundle), &corev1.Secret{})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
