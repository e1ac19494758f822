package testbed

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmer-dev/warmer/internal/secretcopy"
)

// ensureWarmerNamespace creates warmer's namespace, where the controller
// keeps its copies of pull secrets, unless it exists (a real node's
// install made it).
func (cp *ControlPlane) ensureWarmerNamespace(t TB) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretcopy.DefaultNamespace}}
	if err := cp.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
}

// LendPullSecrets lets warmer's controller read the pull secrets of ns,
// as a namespace's admin opts in on a cluster (docs/operations.md, "Pull
// secrets"): a RoleBinding of the shipped ClusterRole.
func (cp *ControlPlane) LendPullSecrets(t TB, ns string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "warmer-controller-pull-secrets"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: secretcopy.DefaultNamespace, Name: "warmer-controller"}},
	}
	if err := cp.Client.Create(context.Background(), rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("letting warmer read the pull secrets of %s: %v", ns, err)
	}
}
