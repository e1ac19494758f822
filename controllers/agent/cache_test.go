package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// TestCacheKeepsWhatTheAgentReads checks, on a real API server, what the
// agent's cache holds: its own Node and NodeWarm only, and of every
// object what the agent reads (labels, taints, spec, generation, resolved
// images, the rollout's bound), without the rest of the statuses, an ImageWarm's labels, annotations or managed fields.
func TestCacheKeepsWhatTheAgentReads(t *testing.T) {
	ctx := context.Background()
	cp := testbed.StartControlPlane(t)
	c := cp.Client
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}

	node := cp.CreateNode(t, "cache-own", map[string]string{"pool": "a"})
	node.Spec.Taints = []corev1.Taint{{Key: "warmer.dev/warming", Effect: corev1.TaintEffectNoSchedule}}
	node.Annotations = map[string]string{"note": "big"}
	must(t, c.Update(ctx, node))
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/app:v1"}, SizeBytes: 1}}
	warm := corev1.NodeCondition{Type: warmv1.ConditionImagesWarm, Status: corev1.ConditionTrue, Reason: warmv1.ReasonNothingToWarm}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test"}, warm}
	must(t, c.Status().Update(ctx, node))
	cp.CreateNode(t, "cache-other", nil)

	iw := build.ImageWarm("default", "cache-iw", build.Images("registry.example/app:v1"))
	iw.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	iw.Labels = map[string]string{"team": "a"}
	must(t, c.Create(ctx, iw))
	iw.Status.ObservedGeneration = iw.Generation
	iw.Status.Conditions = []metav1.Condition{ready}
	iw.Status.Resolved = &warmv1.ResolvedImages{Images: []string{"docker.io/library/app:v2"}, Hash: "0123456789abcdef"}
	iw.Status.Rollout = &warmv1.RolloutStatus{Generation: iw.Generation, AdmittedBelow: 12345, Admitted: 1, Waiting: 2}
	must(t, c.Status().Update(ctx, iw))

	nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	must(t, c.Create(ctx, nw))
	nw.Status.Conditions = []metav1.Condition{ready}
	must(t, c.Status().Update(ctx, nw))

	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: testbed.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Logger: logr.Discard(), Cache: CacheOptions(node.Name), Client: ClientOptions(),
	})
	must(t, err)
	testbed.RunManager(t, mgr)
	cached := mgr.GetClient()

	var gotIW warmv1.ImageWarm
	testbed.Poll(t, 50*time.Millisecond, 30*time.Second, "the ImageWarm in the cache with its status written", func() error {
		if err := cached.Get(ctx, client.ObjectKeyFromObject(iw), &gotIW); err != nil {
			return err
		}
		var cur warmv1.ImageWarm
		if err := c.Get(ctx, client.ObjectKeyFromObject(iw), &cur); err != nil {
			return err
		}
		if gotIW.ResourceVersion != cur.ResourceVersion {
			return errors.New("not the latest version yet")
		}
		return nil
	})
	checkCachedImageWarm(t, &gotIW, iw)

	var gotNode corev1.Node
	must(t, cached.Get(ctx, client.ObjectKeyFromObject(node), &gotNode))
	if len(gotNode.Status.Images) != 0 || gotNode.Annotations != nil || gotNode.ManagedFields != nil {
		t.Errorf("cached Node keeps status %+v, annotations %v or managed fields", gotNode.Status, gotNode.Annotations)
	}
	// The agent's own condition stays: it writes it only when it differs.
	if cs := gotNode.Status.Conditions; len(cs) != 1 || cs[0].Type != warm.Type || cs[0].Reason != warm.Reason {
		t.Errorf("cached Node conditions %+v, want only %s", cs, warm.Type)
	}
	if gotNode.Labels["pool"] != "a" || len(gotNode.Spec.Taints) != 1 || gotNode.UID != node.UID {
		t.Errorf("cached Node lost labels %v, taints %v or uid", gotNode.Labels, gotNode.Spec.Taints)
	}
	if err := cached.Get(ctx, client.ObjectKey{Name: "cache-other"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("another node in the agent's cache: %v", err)
	}

	var gotNW warmv1.NodeWarm
	must(t, cached.Get(ctx, client.ObjectKeyFromObject(nw), &gotNW))
	if len(gotNW.Status.Conditions) != 0 || gotNW.UID != nw.UID {
		t.Errorf("cached NodeWarm: status %+v, uid %s (want no status, uid %s)", gotNW.Status, gotNW.UID, nw.UID)
	}
}

// checkCachedImageWarm checks that the cached copy got of iw keeps what the
// agent reads and nothing else of the status.
func checkCachedImageWarm(t *testing.T, got, iw *warmv1.ImageWarm) {
	t.Helper()
	if len(got.Status.Conditions) != 0 || got.Status.ObservedGeneration != 0 || got.Annotations != nil || got.Labels != nil || got.ManagedFields != nil {
		t.Errorf("cached ImageWarm keeps status %+v, annotations %v, labels %v or managed fields", got.Status, got.Annotations, got.Labels)
	}
	if r := got.Status.Resolved; r == nil || r.Hash != "0123456789abcdef" || len(r.Images) != 1 {
		t.Errorf("cached ImageWarm lost its resolved images, which the agent warms: %+v", r)
	}
	if r := got.Status.Rollout; r == nil || r.AdmittedBelow != 12345 || r.Generation != iw.Generation {
		t.Errorf("cached ImageWarm lost its rollout, which admits the node: %+v", r)
	}
	if len(got.Spec.Images) != 1 || got.Generation != iw.Generation || got.UID != iw.UID {
		t.Errorf("cached ImageWarm lost what the agent reads: spec %+v, generation %d", got.Spec, got.Generation)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
