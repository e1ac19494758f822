package deploy

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// featureObjects are what each feature with permissions of its own adds to
// config/default, by the component that takes it away again.
var featureObjects = map[string][]string{
	"without-startup-taint": {
		"ClusterRole/warmer-agent-startup-taint", "ClusterRoleBinding/warmer-agent-startup-taint",
		"ValidatingAdmissionPolicy/warmer-agent-own-node-taint", "ValidatingAdmissionPolicyBinding/warmer-agent-own-node-taint",
		"ValidatingAdmissionPolicy/warmer-agent-own-node-status", "ValidatingAdmissionPolicyBinding/warmer-agent-own-node-status",
	},
	"without-kubelet-stats": {"ClusterRole/warmer-agent-kubelet-stats", "ClusterRoleBinding/warmer-agent-kubelet-stats"},
	"without-images-from":   {"ClusterRole/warmer-controller-images-from", "ClusterRoleBinding/warmer-controller-images-from"},
}

// featureFlags are the flags each component sets to turn its feature off
// (without-kubelet-stats also sets --image-fs-unknown=pull: with no level
// to read, the default would hold every pull),
// on the agent's DaemonSet or the controller's Deployment.
var featureFlags = map[string]struct{ kind, flag string }{
	"without-startup-taint": {"DaemonSet", "--startup-taint="},
	"without-kubelet-stats": {"DaemonSet", "--kubelet-address="},
	"without-images-from":   {"Deployment", "--images-from-kinds=none"},
}

// TestFeaturesOff installs config/default with every config/components/
// without-* component on a real API server: the startup taint, the
// kubelet's stats and imagesFrom turned off. Each feature's roles and
// policies are gone, its flag is set, nothing else changed, and the
// service accounts are refused exactly what the features needed, while
// what the rest needs is still allowed.
func TestFeaturesOff(t *testing.T) {
	var components, gone []string
	for c, objs := range featureObjects {
		components = append(components, c)
		gone = append(gone, objs...)
	}
	slices.Sort(components)
	dir := overlay(t, components...)
	objs := renderDir(t, dir)
	want := slices.DeleteFunc(slices.Clone(defaultObjects), func(id string) bool { return slices.Contains(gone, id) })
	got := ids(objs)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("with every feature off, config/default renders\n  %v\nwant\n  %v", got, want)
	}
	for c, f := range featureFlags {
		if args := containerArgs(t, objs, f.kind); !slices.Contains(args, f.flag) {
			t.Errorf("%s: %s args %v lack %s", c, f.kind, args, f.flag)
		}
	}

	cp := testbed.StartControlPlane(t)
	mustKubectl(t, cp, "apply", "-k", dir)
	waitForPolicy(t, cp)
	createFixture(t, cp)
	setTaints(t, cp.Client, ownNode, corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoSchedule})

	runChecks(t, clientAs(t, cp, agentImpersonation(ownNode)), []check{
		{name: "remove the startup taint from its Node", want: forbiddenByRBAC, do: untaint(ownNode, nil)},
		{name: "read its kubelet's stats", want: forbiddenByRBAC, do: kubeletAllows(cp.Client, ownNode, "stats")},
		// What the agent still does.
		{name: "list ImageWarms", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &warmv1.ImageWarmList{}) }},
		{name: "create its own NodeWarm", want: allowed, do: createNodeWarm(ownNode)},
		{name: "create another node's NodeWarm", want: deniedByPolicy, do: createNodeWarm("node-c")},
	})
	runChecks(t, clientAs(t, cp, controllerImpersonation()), []check{
		{name: "watch Deployments", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error {
			return watchOnce(ctx, c, &appsv1.DeploymentList{})
		}},
		{name: "list CronJobs", want: forbiddenByRBAC, do: func(ctx context.Context, c client.WithWatch) error { return c.List(ctx, &batchv1.CronJobList{}) }},
		// What the controller still does.
		{name: "update an ImageWarm's status", want: allowed, do: func(ctx context.Context, c client.WithWatch) error { return updateWarmStatus(ctx, c) }},
		{name: "get an ImageWarm", want: allowed, do: func(ctx context.Context, c client.WithWatch) error {
			return c.Get(ctx, types.NamespacedName{Namespace: teamNamespace, Name: warmName}, &warmv1.ImageWarm{})
		}},
	})
}

// containerArgs returns the args of the first container of the one object
// of kind among objs.
func containerArgs(t *testing.T, objs []*unstructured.Unstructured, kind string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			t.Fatalf("%s %s has no container", kind, o.GetName())
		}
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		return args
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}
