package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestLint runs helm lint --strict on the chart, with the default values
// and with the optional parts turned on: warnings fail too.
func TestLint(t *testing.T) {
	for _, set := range []string{"", "podMonitor.enabled=true,crds.keep=true,runtime.preset=cri-dockerd,image.pullPolicy=IfNotPresent"} {
		args := []string{"lint", "--strict", chartDir(t), "--namespace", namespace}
		if set != "" {
			args = append(args, "--set", set)
		}
		out, err := testbed.RunHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(out)
	}
}

// TestInstall installs the chart on a real kube-apiserver, as a user would,
// into a namespace other than config/'s: first server-side dry runs (every
// object validated and admitted, nothing stored), then for real. The
// admission policy must then hold the agent of that namespace to its own
// node's NodeWarm, an upgrade must reach the cluster, and helm uninstall
// must remove every object. No kubelet runs here, so the workloads get no
// Pods; test/cluster runs them.
func TestInstall(t *testing.T) {
	const ns = "ops"
	cp := testbed.StartControlPlane(t)
	removeCRDs(t, cp)
	if out, err := cp.Kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatalf("creating namespace %s: %v\n%s", ns, err, out)
	}

	// Helm's own server dry run checks the chart against the server's
	// version and APIs but sends no object; kubectl's sends every object
	// through validation and admission, and stores none.
	if _, err := cp.Helm(t, "install", release, chartDir(t), "--namespace", ns, "--dry-run=server"); err != nil {
		t.Fatal(err)
	}
	out, err := templateOutput(t, ns)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "warmer.yaml")
	if err := os.WriteFile(manifest, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cp.Kubectl(t, "apply", "--dry-run=server", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply --dry-run=server of the chart: %v\n%s", err, out)
	}
	var ds appsv1.DaemonSet
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "warmer-agent"}, &ds); !apierrors.IsNotFound(err) {
		t.Fatalf("after a dry run, the agent's DaemonSet: %v, want NotFound", err)
	}

	if _, err := cp.Helm(t, "install", release, chartDir(t), "--namespace", ns); err != nil {
		t.Fatal(err)
	}
	objs := helmTemplate(t, ns)
	for _, o := range objs {
		if err := get(cp, o); err != nil {
			t.Errorf("%s after helm install: %v", id(o), err)
		}
	}
	checkPolicy(t, cp, ns)

	// An upgrade with a changed value reaches the cluster, the CRDs
	// included (they are templates of the release).
	if _, err := cp.Helm(t, "upgrade", release, chartDir(t), "--namespace", ns, "--set", "controller.replicas=1"); err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "warmer-controller"}, &deploy); err != nil || deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 1 {
		t.Errorf("after helm upgrade --set controller.replicas=1: %v, replicas %v", err, deploy.Spec.Replicas)
	}

	cp.WaitCRDsCached(t)
	if _, err := cp.Helm(t, "uninstall", release, "--namespace", ns, "--wait"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cp, objs)
}

// removeCRDs deletes the CRDs the test bed installs, so that the chart
// installs them as on a cluster that never had warmer; Helm refuses to
// take over objects another tool made.
func removeCRDs(t *testing.T, cp *testbed.ControlPlane) {
	t.Helper()
	cp.WaitCRDsCached(t)
	var crds []*unstructured.Unstructured
	for _, name := range []string{"imagewarms.warmer.dev", "nodewarms.warmer.dev", "rolloutbounds.warmer.dev"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		crd.SetName(name)
		if err := cp.Client.Delete(context.Background(), crd); err != nil {
			t.Fatalf("deleting CRD %s: %v", name, err)
		}
		crds = append(crds, crd)
	}
	waitGone(t, cp, crds)
}

// checkPolicy checks, with requests impersonating the agent of namespace
// ns on node-a, that the chart's admission policy is in force for that
// agent: its own NodeWarm may be created, another node's is refused with
// the policy's message.
func checkPolicy(t *testing.T, cp *testbed.ControlPlane, ns string) {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":warmer-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}},
	}
	agent, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	// A policy takes effect shortly after it is created; until then the
	// other node's NodeWarm would pass. A dry run is admitted but not stored.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = agent.Create(ctx, other.DeepCopy(), client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may write only NodeWarm node-a, not node-b") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent of %s creating node-b's NodeWarm: %v, want the policy's refusal within 30s", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	own := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err := agent.Create(ctx, own); err != nil {
		t.Errorf("the agent of %s creating its own NodeWarm: %v", ns, err)
	}
}

// get reads o's live copy.
func get(cp *testbed.ControlPlane, o *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	return cp.Client.Get(context.Background(), client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, live)
}

// waitGone waits until every object of objs is deleted.
func waitGone(t *testing.T, cp *testbed.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, o := range objs {
		for {
			err := get(cp, o)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still there after 30s: %v", id(o), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
