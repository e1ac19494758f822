package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// defaultObjects is what config/default installs. A manifest added to or
// dropped from config/ must show here.
var defaultObjects = []string{
	"ClusterRole/warmer-agent",
	"ClusterRole/warmer-agent-kubelet-stats",
	"ClusterRole/warmer-agent-startup-taint",
	"ClusterRole/warmer-controller",
	"ClusterRole/warmer-controller-images-from",
	"ClusterRole/warmer-controller-metrics-auth",
	"ClusterRole/warmer-controller-pull-secrets",
	"ClusterRole/warmer-metrics-reader",
	"ClusterRole/warmer-viewer",
	"ClusterRoleBinding/warmer-agent",
	"ClusterRoleBinding/warmer-agent-kubelet-stats",
	"ClusterRoleBinding/warmer-agent-startup-taint",
	"ClusterRoleBinding/warmer-controller",
	"ClusterRoleBinding/warmer-controller-images-from",
	"ClusterRoleBinding/warmer-controller-metrics-auth",
	"ConfigMap/warmer-admission",
	"CustomResourceDefinition/imagewarms.warmer.dev",
	"CustomResourceDefinition/nodewarms.warmer.dev",
	"CustomResourceDefinition/rolloutbounds.warmer.dev",
	"DaemonSet/warmer-agent",
	"Deployment/warmer-controller",
	"FlowSchema/warmer-agents",
	"Namespace/warmer-system",
	"PriorityLevelConfiguration/warmer-agents",
	"Role/warmer-agent-credential-bundles",
	"Role/warmer-controller-agent-pods",
	"Role/warmer-controller-credential-bundles",
	"Role/warmer-controller-leader-election",
	"RoleBinding/warmer-agent-credential-bundles",
	"RoleBinding/warmer-controller-agent-pods",
	"RoleBinding/warmer-controller-credential-bundles",
	"RoleBinding/warmer-controller-leader-election",
	"Service/warmer-agent-metrics",
	"Service/warmer-controller-metrics",
	"ServiceAccount/warmer-agent",
	"ServiceAccount/warmer-controller",
	"ValidatingAdmissionPolicy/warmer-agent-own-node-status",
	"ValidatingAdmissionPolicy/warmer-agent-own-node-taint",
	"ValidatingAdmissionPolicy/warmer-agent-own-nodewarm",
	"ValidatingAdmissionPolicy/warmer-imagewarm-cluster-levers",
	"ValidatingAdmissionPolicy/warmer-imagewarm-registries",
	"ValidatingAdmissionPolicyBinding/warmer-agent-own-node-status",
	"ValidatingAdmissionPolicyBinding/warmer-agent-own-node-taint",
	"ValidatingAdmissionPolicyBinding/warmer-agent-own-nodewarm",
	"ValidatingAdmissionPolicyBinding/warmer-imagewarm-cluster-levers",
	"ValidatingAdmissionPolicyBinding/warmer-imagewarm-registries",
}

// TestApply installs config/default with kubectl apply -k, as `make
// deploy` does, on a control plane that already has the CRDs (as after an
// earlier install), checks that every object is there, that applying
// again changes nothing (an upgrade to the same version), and that
// `kubectl delete -k` removes it. No kubelet runs, so the workloads get no
// Pods: their objects are what is checked.
func TestApply(t *testing.T) {
	objs := render(t, "default")
	got := ids(objs)
	slices.Sort(got)
	if !slices.Equal(got, defaultObjects) {
		t.Fatalf("config/default renders\n  %v\nwant\n  %v", got, defaultObjects)
	}
	cp := testbed.StartControlPlane(t)

	out := mustKubectl(t, cp, "apply", "-k", configDir(t, "default"))
	// The API server warns, without refusing, when a workload's Pods
	// would be refused by the namespace's Pod Security level.
	if strings.Contains(out, "PodSecurity") {
		t.Errorf("apply warns about Pod Security:\n%s", out)
	}
	for _, o := range objs {
		if err := get(cp, o); err != nil {
			t.Errorf("%s/%s after apply: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// Each runtime's overlay changes only the agent's socket: the API
	// server takes it (a dry run, so the install stays config/default's).
	for name := range runtimeComponents {
		if out, err := kubectl(t, cp, "apply", "--dry-run=server", "-k", overlay(t, name)); err != nil || strings.Contains(out, "PodSecurity") {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}

	out = mustKubectl(t, cp, "apply", "-k", configDir(t, "default"))
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(line, " unchanged") {
			t.Errorf("applying again changed something: %s", line)
		}
	}

	// No namespace controller runs here, so the namespace stays
	// Terminating; everything cluster-scoped must go.
	cp.WaitCRDsCached(t)
	mustKubectl(t, cp, "delete", "-k", configDir(t, "default"), "--ignore-not-found", "--wait=false")
	waitGone(t, cp, objs)
}

// TestPrometheusOverlay checks that config/prometheus is config/default
// plus a PodMonitor for each role and the identity the controller's
// scrapes with. It is not applied: that needs the
// Prometheus Operator's CRDs.
func TestPrometheusOverlay(t *testing.T) {
	got := ids(render(t, "prometheus"))
	slices.Sort(got)
	want := append(slices.Clone(defaultObjects), "PodMonitor/warmer-agent", "PodMonitor/warmer-controller",
		"ServiceAccount/warmer-metrics-scraper", "Secret/warmer-metrics-scraper-token", "ClusterRoleBinding/warmer-metrics-scraper")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("config/prometheus renders\n  %v\nwant\n  %v", got, want)
	}
}

// get reads o's live copy, in its namespace only if its kind has one.
func get(cp *testbed.ControlPlane, o *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	key := client.ObjectKey{Name: o.GetName()}
	m, err := cp.Client.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
	if err != nil {
		return err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = o.GetNamespace()
	}
	return cp.Client.Get(context.Background(), key, live)
}

// waitGone waits until the cluster-scoped objects of objs are deleted.
func waitGone(t *testing.T, cp *testbed.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	// A CustomResourceDefinition goes only when the API server's own
	// finalizer has removed its instances; that controller retries with
	// back-off and may poll for up to a minute, and once in a few dozen
	// runs here it took more than 30 s with no instance at all. Two
	// minutes bounds its retries; what it last said is printed if not.
	const bound = 2 * time.Minute
	deadline := time.Now().Add(bound)
	for _, o := range objs {
		if o.GetNamespace() != "" || o.GetKind() == "Namespace" {
			continue
		}
		for {
			err := get(cp, o)
			if client.IgnoreNotFound(err) == nil && err != nil {
				break
			}
			if time.Now().After(deadline) {
				out, _ := kubectl(t, cp, "get", strings.ToLower(o.GetKind()), o.GetName(), "-o", "jsonpath={.metadata.finalizers} {.status.conditions}")
				t.Fatalf("%s/%s still there %v after kubectl delete: %v\n%s", o.GetKind(), o.GetName(), bound, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
