package deploy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestAgentPermissions makes the agent's requests, and requests it must not
// make, as its service account on node-a: RBAC allows the first and
// refuses the second; the admission policy limits its NodeWarm writes to
// node-a's. Impersonation carries the node name in the user's extra, as a
// Pod-bound token does, so the policy sees what it would see in a cluster.
func TestAgentPermissions(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	createFixture(t, cp)
	agent := clientAs(t, cp, agentImpersonation(ownNode))
	inTeam := client.InNamespace(teamNamespace)
	warmKey := types.NamespacedName{Namespace: teamNamespace, Name: warmName}

	runChecks(t, agent, []check{
		{name: "list ImageWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &warmv1.ImageWarmList{}) }},
		{name: "watch ImageWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &warmv1.ImageWarmList{}) }},
		{name: "update an ImageWarm's spec", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return updateWarmSpec(ctx, c) }},
		{name: "update an ImageWarm's status", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return updateWarmStatus(ctx, c) }},
		{name: "delete an ImageWarm", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Delete(ctx, &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: warmKey.Namespace, Name: warmKey.Name}})
		}},
		{name: "watch RolloutBounds", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &warmv1.RolloutBoundList{})
		}},
		{name: "create a RolloutBound", want: forbiddenByRBAC, do: createRolloutBound},
		{name: "watch its own Node by name", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &corev1.NodeList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", ownNode)})
		}},
		{name: "update a Node", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			var n corev1.Node
			if err := c.Get(ctx, types.NamespacedName{Name: ownNode}, &n); err != nil {
				return err
			}
			n.Labels["warmer.dev/touched"] = "yes"
			return c.Update(ctx, &n)
		}},
		// Pull secrets reach it in its node's sealed bundle in warmer's
		// namespace; no Secret elsewhere, named or not. RBAC cannot give
		// each agent its own resourceNames, so another node's bundle is
		// readable too: what it cannot do is open it (test/security).
		{name: "get its node's credential bundle", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: credbundle.Name(ownNode)}, &corev1.Secret{})
		}},
		{name: "get another node's sealed bundle", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: credbundle.Name(otherNode)}, &corev1.Secret{})
		}},
		{name: "get a pull secret", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: pullSecret}, &corev1.Secret{})
		}},
		{name: "get a secret of kube-system", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "bootstrap-token-abcdef"}, &corev1.Secret{})
		}},
		{name: "list bundles", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(systemNamespace))
		}},
		{name: "list secrets", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.SecretList{}) }},
		{name: "list secrets of a namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.SecretList{}, inTeam) }},
		{name: "watch secrets", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &corev1.SecretList{}) }},
		{name: "list pods", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.PodList{}) }},
		{name: "record an events.k8s.io event", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.Create(ctx, newEvent(teamNamespace)) }},
		{name: "continue an event series", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			ev := newEvent(teamNamespace)
			if err := c.Create(ctx, ev); err != nil {
				return err
			}
			return c.Patch(ctx, ev, client.RawPatch(types.MergePatchType, []byte(`{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:00.000000Z"}}`)))
		}},
		{name: "record a core v1 event", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.Create(ctx, newCoreEvent(teamNamespace)) }},
		{name: "get its NodeWarm before it exists", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Name: ownNode}, &warmv1.NodeWarm{})
		}},
		{name: "create its own NodeWarm", want: allowed, do: createNodeWarm(ownNode)},
		{name: "update its own NodeWarm's status", want: allowed, do: updateNodeWarm(cp.Client, ownNode, true)},
		{name: "patch its own NodeWarm's status", want: allowed, do: patchNodeWarmStatus(ownNode)},
		// To give it a replaced Node as owner.
		{name: "update its own NodeWarm", want: allowed, do: updateNodeWarm(cp.Client, ownNode, false)},
		{name: "delete its own NodeWarm", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Delete(ctx, &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: ownNode}})
		}},
		// Its cache watches its own, by a field selector RBAC cannot
		// require; NodeWarms hold no secrets.
		{name: "list NodeWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &warmv1.NodeWarmList{}) }},
		{name: "create another node's NodeWarm", want: deniedByPolicy, do: createNodeWarm("node-c"),
			msg: "the agent on node node-a may write only NodeWarm node-a, not node-c"},
		{name: "update another node's NodeWarm's status", want: deniedByPolicy, do: updateNodeWarm(cp.Client, otherNode, true)},
		{name: "patch another node's NodeWarm's status", want: deniedByPolicy, do: patchNodeWarmStatus(otherNode)},
		// The key another node's credentials are sealed to: setting it
		// would have them sealed to a key this node holds.
		{name: "publish its own credential key", want: allowed, do: patchCredentialKey(ownNode)},
		{name: "publish another node's credential key", want: deniedByPolicy, do: patchCredentialKey(otherNode),
			msg: "the agent on node node-a may write only NodeWarm node-a, not node-b"},
		{name: "update another node's NodeWarm", want: deniedByPolicy, do: updateNodeWarm(cp.Client, otherNode, false)},
		// The kubelet asks the API server (a SubjectAccessReview) before
		// it answers /stats/summary, which the disk guard reads.
		{name: "read its kubelet's stats", want: allowed, do: kubeletAllows(cp.Client, ownNode, "stats")},
		{name: "use its kubelet's proxy (exec, logs, anything)", want: forbiddenByRBAC, do: kubeletAllows(cp.Client, ownNode, "proxy")},
		// Its /metrics is plain (docs/security.md): no node may ask
		// whose a token is or what RBAC lets someone do.
		{name: "review a token", want: forbiddenByRBAC, do: createTokenReview},
		{name: "review an access", want: forbiddenByRBAC, do: createAccessReview},
	})

	// A token that is not bound to a Pod on a node carries no node name:
	// the policy refuses every NodeWarm write rather than guess.
	t.Run("without a node name", func(t *testing.T) {
		runChecks(t, clientAs(t, cp, agentImpersonation("")), []check{
			{name: "create a NodeWarm", want: deniedByPolicy, do: createNodeWarm("node-d"), msg: "carries no node name"},
			{name: "update its NodeWarm's status", want: deniedByPolicy, do: updateNodeWarm(cp.Client, ownNode, true), msg: "carries no node name"},
		})
	})
}

// TestControllerPermissions makes the status controller's requests, and
// some it must not make, as its service account.
func TestControllerPermissions(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	createFixture(t, cp)
	ctrl := clientAs(t, cp, controllerImpersonation())
	inSystem := func(name string) types.NamespacedName {
		return types.NamespacedName{Namespace: systemNamespace, Name: name}
	}

	runChecks(t, ctrl, []check{
		{name: "list ImageWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &warmv1.ImageWarmList{}) }},
		{name: "watch ImageWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &warmv1.ImageWarmList{}) }},
		{name: "update an ImageWarm's status", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return updateWarmStatus(ctx, c) }},
		{name: "update an ImageWarm's spec", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return updateWarmSpec(ctx, c) }},
		{name: "watch NodeWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &warmv1.NodeWarmList{}) }},
		{name: "create a NodeWarm", want: forbiddenByRBAC, do: createNodeWarm(ownNode)},
		{name: "watch RolloutBounds", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &warmv1.RolloutBoundList{})
		}},
		{name: "create a RolloutBound", want: allowed, do: createRolloutBound},
		{name: "update a RolloutBound", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			var b warmv1.RolloutBound
			if err := c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: warmName}, &b); err != nil {
				return err
			}
			b.Spec.AdmittedBelow++
			return c.Update(ctx, &b)
		}},
		{name: "delete a RolloutBound", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Delete(ctx, &warmv1.RolloutBound{ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: warmName}})
		}},
		{name: "update a NodeWarm's status", want: forbiddenByRBAC, do: updateNodeWarm(cp.Client, otherNode, true)},
		// It seals to the keys agents publish; it cannot set one.
		{name: "set a node's credential key", want: forbiddenByRBAC, do: patchCredentialKey(otherNode)},
		// A compromised controller cannot change where Pods run.
		{name: "patch a Node", want: forbiddenByRBAC, do: untaint(ownNode)},
		{name: "watch Nodes' metadata", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
			return watchOnce(ctx, c, list)
		}},
		// A namespace opts in to lend its pull secrets with a RoleBinding;
		// the fixture's namespace has none.
		{name: "get a pull secret of a namespace that did not opt in", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: pullSecret}, &corev1.Secret{})
		}},
		{name: "list secrets", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.SecretList{}) }},
		{name: "watch the bundles", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &corev1.SecretList{}, client.InNamespace(systemNamespace))
		}},
		{name: "write a bundle", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, credbundle.Secret(systemNamespace, "node-new", "k", "i", []byte("sealed")))
		}},
		{name: "write a secret in another namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, credbundle.Secret(teamNamespace, "node-new", "k", "i", []byte("sealed")))
		}},
		// imagesFrom: workloads are listed and watched, nothing else.
		{name: "watch Deployments", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &appsv1.DeploymentList{})
		}},
		{name: "list StatefulSets", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &appsv1.StatefulSetList{}) }},
		{name: "watch DaemonSets", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &appsv1.DaemonSetList{}) }},
		{name: "watch Jobs", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &batchv1.JobList{}) }},
		{name: "watch CronJobs", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return watchOnce(ctx, c, &batchv1.CronJobList{}) }},
		{name: "get a Deployment", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: "web"}, &appsv1.Deployment{})
		}},
		{name: "create a Deployment", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: "web"}})
		}},
		{name: "list Pods", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &corev1.PodList{}) }},
		// Which agents are alive: the agent Pods of warmer's namespace,
		// read only.
		{name: "watch Pods in warmer's namespace", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &corev1.PodList{}, client.InNamespace(systemNamespace))
		}},
		{name: "list Pods of another namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.List(ctx, &corev1.PodList{}, client.InNamespace(teamNamespace))
		}},
		{name: "delete a Pod in warmer's namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "warmer-agent-x"}})
		}},
		{name: "list ReplicaSets", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &appsv1.ReplicaSetList{}) }},
		{name: "create its Lease", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, newLease(systemNamespace, leaseName))
		}},
		{name: "renew its Lease", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			var l coordinationv1.Lease
			if err := c.Get(ctx, inSystem(leaseName), &l); err != nil {
				return err
			}
			l.Spec.LeaseDurationSeconds = new(int32(15))
			return c.Update(ctx, &l)
		}},
		{name: "get another Lease", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, inSystem("kube-scheduler"), &coordinationv1.Lease{})
		}},
		{name: "create a Lease in another namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, newLease(teamNamespace, leaseName))
		}},
		{name: "record a leader election event", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Create(ctx, newCoreEvent(systemNamespace))
		}},
		{name: "record an event in another namespace", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.Create(ctx, newEvent(teamNamespace)) }},
		// Authenticated /metrics (--metrics-secure): whose a scraper's
		// token is, and whether they may get /metrics.
		{name: "review a token", want: allowed, do: createTokenReview},
		{name: "review an access", want: allowed, do: createAccessReview},
	})
}

// createTokenReview asks who a (made-up) token belongs to, as the
// authenticated /metrics does for each scrape.
func createTokenReview(ctx context.Context, c client.WithWatch) error {
	return c.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}})
}

// createAccessReview asks whether a user may get /metrics, as the
// authenticated /metrics does for each scrape.
func createAccessReview(ctx context.Context, c client.WithWatch) error {
	return c.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:monitoring:prometheus",
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}})
}

// kubeletAllows asks the API server, as a kubelet with webhook
// authorization does for each request, whether the agent on node may get
// that node's subresource (stats for /stats/*, proxy for most else). A
// refusal comes back as a Forbidden error, so that runChecks can judge it.
func kubeletAllows(admin client.Client, node, subresource string) func(context.Context, client.WithWatch) error {
	return func(ctx context.Context, _ client.WithWatch) error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   agentUser,
			Groups: serviceAccountGroups,
			Extra:  map[string]authorizationv1.ExtraValue{nodeNameKey: {node}},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Resource: "nodes", Subresource: subresource, Name: node,
			},
		}}
		if err := admin.Create(ctx, sar); err != nil {
			return fmt.Errorf("creating a SubjectAccessReview: %w", err)
		}
		if sar.Status.Allowed {
			return nil
		}
		return apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/" + subresource}, node, errors.New(sar.Status.Reason))
	}
}

// createRolloutBound creates the RolloutBound of the fixture's ImageWarm.
func createRolloutBound(ctx context.Context, c client.WithWatch) error {
	return c.Create(ctx, &warmv1.RolloutBound{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: warmName},
		Spec:       warmv1.RolloutBoundSpec{ImageWarmUID: "uid", Generation: 1, AdmittedBelow: 1},
	})
}
