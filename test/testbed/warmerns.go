package testbed

import (
	"context"

	corev1 "k8s.io/api/core/v1"
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
