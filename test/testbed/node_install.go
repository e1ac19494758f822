package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/controllers/gate"
)

// InstallOnNode installs warmer on the real node as a user would: the
// release image built at tag and imported into the node's containerd,
// then config/default with the bed's network component
// (test/cluster/testdata/bed) and the given kustomize components (paths
// from the repository root, say "config/components/warm-gate") applied
// with kubectl. It waits until the agent's and the controller's Pods are
// Ready, and deletes everything at cleanup.
func InstallOnNode(t TB, n *RealNode, tag string, components ...string) {
	t.Helper()
	ImportWarmerImage(t, n, tag)
	dir := shortDir(t, "install")
	root := RepoRoot(t)
	rel := func(target string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, target))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	comps := []string{rel("test/cluster/testdata/bed")}
	for _, c := range components {
		comps = append(comps, rel(c))
	}
	head := fmt.Sprintf("resources:\n  - %s\ncomponents:\n  - %s\nimages:\n  - {name: %s, newTag: %s}",
		rel("config/default"), strings.Join(comps, "\n  - "), WarmerRepo, tag)
	WriteRunLayer(t, n, dir, head)
	if out, err := n.Kubectl(t, "apply", "-k", dir); err != nil {
		t.Fatalf("installing warmer: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = n.Kubectl(t, "delete", "-k", dir, "--ignore-not-found", "--timeout=2m") })
	waitInstalled(t, n)
}

// waitInstalled waits until the agent DaemonSet's one Pod and the
// controller Deployment's Pods, of their latest templates, are Ready.
func waitInstalled(t TB, n *RealNode) {
	t.Helper()
	ctx := context.Background()
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: SystemNamespace, Name: name} }
	Eventually(t, 3*time.Minute, "warmer's agent and controller Ready", func() error {
		var ds appsv1.DaemonSet
		if err := n.Client.Get(ctx, key("warmer-agent"), &ds); err != nil {
			return err
		}
		if st := ds.Status; st.ObservedGeneration != ds.Generation || st.NumberReady != 1 || st.UpdatedNumberScheduled != 1 || st.NumberUnavailable != 0 {
			return fmt.Errorf("agent DaemonSet status %+v", st)
		}
		var d appsv1.Deployment
		if err := n.Client.Get(ctx, key("warmer-controller"), &d); err != nil {
			return err
		}
		if st := d.Status; st.ObservedGeneration != d.Generation || st.ReadyReplicas < 1 || st.UpdatedReplicas != st.Replicas || st.UnavailableReplicas != 0 {
			return fmt.Errorf("controller Deployment status %+v", st)
		}
		return nil
	})
}

// WaitGateArmed waits until a Pod of namespace ns opted in to the warm
// gate would be created gated: the controller leads and holds the arming
// Lease. Each look is a dry run, which runs the admission policy and
// stores nothing.
func WaitGateArmed(t TB, cp *ControlPlane, ns string) {
	t.Helper()
	Eventually(t, 90*time.Second, "the warm gate armed", func() error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "armed-probe", Labels: map[string]string{gate.LabelImageWarm: "probe"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.invalid/probe:v1"}}},
		}
		if err := cp.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
			return err
		}
		if HasWarmGate(pod) {
			return nil
		}
		return fmt.Errorf("a probe Pod created with gates %v", pod.Spec.SchedulingGates)
	})
}
