package deploy

import (
	"context"
	"encoding/base64"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
)

// The objects the permission checks act on.
const (
	teamNamespace = "team"
	pullSecret    = "regcred"
	warmName      = "web"
	ownNode       = "node-a" // the impersonated agent's node
	otherNode     = "node-b" // another node, whose NodeWarm exists
)

// createFixture creates, as admin, what the checks act on: a namespace
// with a pull secret, the nodes' credential bundles and an ImageWarm, two Nodes, and the other node's
// NodeWarm. Admin writes to NodeWarms are not subject to the policy.
func createFixture(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	for _, n := range []string{ownNode, otherNode} {
		cp.CreateNode(t, n, nil)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: pullSecret},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace}},
		secret,
		// The nodes' bundles, as the controller would write them.
		credbundle.Secret(systemNamespace, ownNode, "key", "inputs", []byte("sealed")),
		credbundle.Secret(systemNamespace, otherNode, "key", "inputs", []byte("sealed")),
		&warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: warmName},
			Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"nginx:1.27"}},
		},
		&warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: otherNode}},
	}
	for _, o := range objs {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// updateWarmSpec changes an ImageWarm's spec as c.
func updateWarmSpec(ctx context.Context, c client.Client) error {
	var iw warmv1.ImageWarm
	if err := c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: warmName}, &iw); err != nil {
		return err
	}
	iw.Spec.Priority = 10
	return c.Update(ctx, &iw)
}

// updateWarmStatus writes an ImageWarm's status as c.
func updateWarmStatus(ctx context.Context, c client.Client) error {
	var iw warmv1.ImageWarm
	if err := c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: warmName}, &iw); err != nil {
		return err
	}
	iw.Status.ImageCount = 1
	return c.Status().Update(ctx, &iw)
}

// createNodeWarm creates a NodeWarm as c.
func createNodeWarm(name string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		return c.Create(ctx, &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
}

// updateNodeWarm writes a NodeWarm (its status when status is true) with a
// whole update, as the agent does. The object is read with admin, so that
// a refused read cannot pass for a refused write.
func updateNodeWarm(admin client.Reader, name string, status bool) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		var nw warmv1.NodeWarm
		if err := admin.Get(ctx, types.NamespacedName{Name: name}, &nw); err != nil {
			return err
		}
		nw.Labels = map[string]string{"touched": "yes"}
		nw.Status.Desired++
		if status {
			return c.Status().Update(ctx, &nw)
		}
		return c.Update(ctx, &nw)
	}
}

// patchCredentialKey merge-patches a NodeWarm's status.credentialKey as
// c, as an agent publishes its key.
func patchCredentialKey(name string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: name}}
		key := base64.StdEncoding.EncodeToString(make([]byte, 32))
		return c.Status().Patch(ctx, nw, client.RawPatch(types.MergePatchType, []byte(`{"status":{"credentialKey":{"kem":32,"publicKey":"`+key+`"}}}`)))
	}
}

// patchNodeWarmStatus merge-patches a NodeWarm's status as c.
func patchNodeWarmStatus(name string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, c client.WithWatch) error {
		nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return c.Status().Patch(ctx, nw, client.RawPatch(types.MergePatchType, []byte(`{"status":{"failed":1}}`)))
	}
}

// newEvent is a valid events.k8s.io Event about the fixture's ImageWarm,
// as the agent records them.
func newEvent(ns string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: warmName + "-"},
		EventTime:           metav1.NowMicro(),
		ReportingController: "warmer.dev/agent",
		ReportingInstance:   ownNode,
		Action:              "Pull",
		Reason:              "Pulled",
		Type:                corev1.EventTypeNormal,
		Note:                "Successfully pulled image",
		Regarding:           corev1.ObjectReference{APIVersion: warmv1.GroupVersion.String(), Kind: "ImageWarm", Namespace: ns, Name: warmName},
	}
}

// newCoreEvent is a valid core v1 Event, as leader election records them.
func newCoreEvent(ns string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "warmer-controller-"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: ns, Name: leaseName},
		Reason:         "LeaderElection",
		Message:        "became leader",
		Type:           corev1.EventTypeNormal,
	}
}

// leaseName is the controller's leader election Lease (cmd/warmer).
const leaseName = "warmer-controller.warmer.dev"

func newLease(ns, name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("warmer-controller-0")},
	}
}
