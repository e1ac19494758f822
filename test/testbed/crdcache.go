package testbed

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// WaitCRDsCached waits until the API server's watch cache serves the
// instances of warmer's three CRDs. A CRD deleted before that waits on the
// API server's own finalizer, which fails to list instances from a cache
// still initializing ("storage is (re)initializing") and retries with a
// back-off that grew past two minutes in cold CI runs; a test that deletes
// the CRDs seconds after the control plane or an install came up waits
// here first (as a user deleting right after installing would need to).
func (cp *ControlPlane) WaitCRDsCached(t TB) {
	t.Helper()
	// resourceVersion "0" is answered from the watch cache only.
	fromCache := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
	for _, list := range []client.ObjectList{&warmv1.ImageWarmList{}, &warmv1.NodeWarmList{}, &warmv1.RolloutBoundList{}} {
		Poll(t, 200*time.Millisecond, time.Minute, "listing warmer's CRDs from the API server's watch cache", func() error {
			return cp.Client.List(context.Background(), list, fromCache)
		})
	}
}
