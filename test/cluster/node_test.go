package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestNodeReady checks the node the kubelet registered: Ready, named and
// addressed as the test bed set it up, with its runtime being containerd 2.
func TestNodeReady(t *testing.T) {
	var n corev1.Node
	if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &n); err != nil {
		t.Fatal(err)
	}
	if !nodeReady(&n) {
		t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
	}
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "containerd://2.") {
		t.Errorf("runtime %q, want containerd 2.x", got)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != "v1.37.1" {
		t.Errorf("kubelet %q, want v1.37.1", got)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != node.IP {
		t.Errorf("InternalIP %q, want %q", ip, node.IP)
	}
}

// TestHostNetworkPod runs a pod from an image pushed to the test registry
// and named by its public registry, to completion, and reads its output
// through the API server with kubectl logs: the scheduler placed it, the
// kubelet pulled and ran it, its token reached the API server.
func TestHostNetworkPod(t *testing.T) {
	img := pushHello(t)
	ns := namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:   true,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:  "hello",
				Image: mirrored + "/warmer-dev/testbed-hello:v1",
				Env:   node.PodEnv(),
			}},
		},
	}
	if err := node.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pod, corev1.PodSucceeded)

	out, err := node.Kubectl(t, "logs", "-n", ns, "hello")
	if err != nil {
		t.Fatalf("kubectl logs: %v: %s", err, out)
	}
	want := fmt.Sprintf("user=system:serviceaccount:%s:default node=%s", ns, node.Name)
	if !strings.Contains(out, "hello from the test bed") || !strings.Contains(out, want) {
		t.Errorf("kubectl logs said %q, want the greeting and %q", out, want)
	}
	if err := node.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	if got := pod.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(got, img.Digest) {
		t.Errorf("the pod ran image %q, want the pushed %s", got, img.Digest)
	}
}

// TestKubectlExec runs a command in a running pod's container with
// kubectl exec: the API server's kubelet client, the kubelet and
// containerd's streaming server on the node.
func TestKubectlExec(t *testing.T) {
	pushHello(t)
	ns := namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:  "sleeper",
				Image: mirrored + "/warmer-dev/testbed-hello:v1",
				Args:  []string{"sleep"},
				Env:   node.PodEnv(),
			}},
		},
	}
	if err := node.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pod, corev1.PodRunning)
	out, err := node.Kubectl(t, "exec", "-n", ns, "sleeper", "--", "/hello")
	if err != nil {
		t.Fatalf("kubectl exec: %v: %s", err, out)
	}
	if want := "node=" + node.Name; !strings.Contains(out, want) {
		t.Errorf("kubectl exec printed %q, want %q in it", out, want)
	}
}

// pushHello pushes the hello program's image to the test registry, where
// the node finds it as ghcr.io/warmer-dev/testbed-hello:v1.
func pushHello(t *testing.T) testbed.Image {
	t.Helper()
	return reg.Push(t, "warmer-dev/testbed-hello:v1", testbed.GoImage(t, "./test/cluster/hello"))
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-"}}
	if err := node.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), ns) })
	// Pods need the namespace's default ServiceAccount, which the
	// controller manager creates.
	testbed.Poll(t, 100*time.Millisecond, time.Minute, "the default ServiceAccount of "+ns.Name, func() error {
		return node.Client.Get(context.Background(), client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

// waitPhase waits until pod reaches phase, failing early on a terminal other
// phase, with the pod's status and the kubelet's log.
func waitPhase(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var p corev1.Pod
		err := node.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p)
		if err == nil && p.Status.Phase == phase {
			return
		}
		terminal := err == nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded)
		if terminal || time.Now().After(deadline) {
			t.Fatalf("pod %s/%s: want %s, have %s (%v)\nstatus: %+v\nkubelet:\n%s",
				pod.Namespace, pod.Name, phase, p.Status.Phase, err, p.Status, node.KubeletLog(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
