package testbed

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LendPullSecrets lets warmer's controller read the pull secrets of ns,
// as a namespace's admin opts in on a cluster (docs/operations.md, "Pull
// secrets"): a RoleBinding of the shipped ClusterRole.
func (cp *ControlPlane) LendPullSecrets(t TB, ns string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "warmer-controller-pull-secrets"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SystemNamespace, Name: ControllerServiceAccount}},
	}
	if err := cp.Client.Create(context.Background(), rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("letting warmer read the pull secrets of %s: %v", ns, err)
	}
}

// LendNamedPullSecrets lets warmer's controller read only the named pull
// secrets of ns, as a namespace's admin narrows the opt-in
// (docs/guides/private-registries.md): a Role granting get on those
// Secrets by name, bound to the controller.
func (cp *ControlPlane) LendNamedPullSecrets(t TB, ns string, names ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-secrets"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: names}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmer-pull-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SystemNamespace, Name: ControllerServiceAccount}},
	}
	if err := cp.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("letting warmer read %v of %s: %v", names, ns, err)
	}
	if err := cp.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("letting warmer read %v of %s: %v", names, ns, err)
	}
}
