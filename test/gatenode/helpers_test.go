package gatenode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
)

// deployment is one replica of image, labelled app=name, opted in to the
// gate on ImageWarm name when gated.
func deployment(name, image string, gated bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	if gated {
		labels[gate.LabelImageWarm] = name
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// The test bed's pods use the host's network (no pod network).
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "app", Image: image}},
				},
			},
		},
	}
}

// firstPod waits for the one Pod of the Deployment labelled app=name.
func firstPod(t *testing.T, n *testbed.RealNode, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testbed.Poll(t, 50*time.Millisecond, time.Minute, "the Pod of Deployment "+name, func() error {
		var pods corev1.PodList
		if err := n.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		pod = &pods.Items[0]
		return nil
	})
	return pod
}

// waitRunning waits for the Pod to run, and returns it.
func waitRunning(t *testing.T, n *testbed.RealNode, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	testbed.Eventually(t, 2*time.Minute, pod.Name+" running", func() error {
		pod = getPod(t, n, pod)
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s; events %q", pod.Status.Phase, testbed.EventLines(n.PodEvents(t, pod)))
		}
		return nil
	})
	return pod
}

// imagePresent asks the node's containerd, as the kubelet would.
func imagePresent(t *testing.T, n *testbed.RealNode, image string) bool {
	t.Helper()
	st, err := n.Containerd.ImageService(t).ImageStatus(context.Background(),
		&runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		t.Fatalf("image status of %s: %v", image, err)
	}
	return st.Image != nil
}

func create(t *testing.T, n *testbed.RealNode, obj client.Object) {
	t.Helper()
	if err := n.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func getPod(t *testing.T, n *testbed.RealNode, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := n.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func getNode(t *testing.T, n *testbed.RealNode) *corev1.Node {
	t.Helper()
	var node corev1.Node
	if err := n.Client.Get(context.Background(), client.ObjectKey{Name: n.Name}, &node); err != nil {
		t.Fatal(err)
	}
	return &node
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
