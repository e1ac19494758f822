package startuptaint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// The install of warmer on the tainted node, as test/cluster installs it
// (config/default through the bed's network component), and what the
// tests need of the running agent.

// warmerRepo is the release image's repository; warmerTag the tag this
// package builds it with.
const (
	warmerRepo       = testbed.WarmerRepo
	warmerTag        = "v0.0.0-startuptaint"
	installNamespace = "warmer-system"
)

// install applies config/default with the bed's network component
// (test/cluster/testdata/bed, which the cluster tests' installs share),
// config/components/readiness-taint and what only this run knows, and waits for the agent to be Ready. The
// controller's Pod tolerates no startup taint, so it may wait: the agent
// is what these tests are about.
func install(t *testing.T, n *testbed.RealNode) {
	t.Helper()
	testbed.ImportWarmerImage(t, n, warmerTag)
	dir := t.TempDir()
	root := testbed.RepoRoot(t)
	rel := func(target string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, target))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	head := fmt.Sprintf(`resources:
  - %s
components:
  - %s
  - %s
images:
  - {name: %s, newTag: %s}`, rel("config/default"), rel("test/cluster/testdata/bed"), rel("config/components/readiness-taint"), warmerRepo, warmerTag)
	testbed.WriteRunLayer(t, n, dir, head)
	kubectl(t, n, "apply", "-k", dir)
	t.Cleanup(func() { _, _ = n.Kubectl(t, "delete", "-k", dir, "--ignore-not-found", "--timeout=2m") })
	waitAgent(t, n)
}

// waitAgent waits until the agent DaemonSet's Pod, of its latest
// template, is Ready on the node.
func waitAgent(t *testing.T, n *testbed.RealNode) {
	t.Helper()
	testbed.Eventually(t, 3*time.Minute, "the agent DaemonSet Ready", func() error {
		var ds appsv1.DaemonSet
		if err := n.Client.Get(context.Background(), client.ObjectKey{Namespace: installNamespace, Name: "warmer-agent"}, &ds); err != nil {
			return err
		}
		st := ds.Status
		if st.ObservedGeneration != ds.Generation || st.DesiredNumberScheduled != 1 || st.NumberReady != 1 || st.UpdatedNumberScheduled != 1 || st.NumberUnavailable != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// setDeadline rolls the agent to a new --startup-taint-deadline.
func setDeadline(t *testing.T, n *testbed.RealNode, d time.Duration) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--startup-taint-deadline=%s"}]`, d)
	kubectl(t, n, "-n", installNamespace, "patch", "daemonset", "warmer-agent", "--type=json", "-p", patch)
}

// kubectl runs kubectl as the admin and fails the test on an error.
func kubectl(t *testing.T, n *testbed.RealNode, args ...string) string {
	t.Helper()
	out, err := n.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// agentClient is a client with the token the kubelet projected into the
// running agent Pod, read from the host folder containerd mounts there
// (the image has no shell to cat it with): the agent's real identity,
// node-name claim included.
func agentClient(t *testing.T, n *testbed.RealNode) client.Client {
	t.Helper()
	var pods corev1.PodList
	err := n.Client.List(context.Background(), &pods, client.InNamespace(installNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "warmer", "app.kubernetes.io/component": "agent"})
	if err != nil {
		t.Fatal(err)
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID == ""
	})
	if len(pods.Items) != 1 {
		t.Fatalf("want one running agent pod, have %d", len(pods.Items))
	}
	id, _ := strings.CutPrefix(pods.Items[0].Status.ContainerStatuses[0].ContainerID, "containerd://")
	st, err := n.Containerd.RuntimeService(t).ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Status.Mounts {
		if m.ContainerPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
			continue
		}
		token, err := os.ReadFile(filepath.Join(m.HostPath, "token"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := &rest.Config{Host: n.Config.Host, BearerToken: string(token),
			TLSClientConfig: rest.TLSClientConfig{CAData: n.Config.CAData}}
		c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Fatal("the agent pod has no service-account token mounted")
	return nil
}
