package privateimages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"

	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// wantPolicy reads the kubelet's running configuration (its /configz, through
// the API server) and fails unless it has the verification policy: a test
// of a policy that silently did not apply would prove nothing.
func (b *bed) wantPolicy(t *testing.T, policy string) {
	t.Helper()
	out, err := b.node.Kubectl(t, "get", "--raw", "/api/v1/nodes/"+b.node.Name+"/proxy/configz")
	if err != nil {
		t.Fatalf("reading the kubelet's configz: %v: %s", err, out)
	}
	var cz struct {
		KubeletConfig struct {
			Policy string `json:"imagePullCredentialsVerificationPolicy"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(out), &cz); err != nil {
		t.Fatalf("the kubelet's configz: %v: %s", err, out)
	}
	if cz.KubeletConfig.Policy != policy {
		t.Fatalf("the kubelet runs with imagePullCredentialsVerificationPolicy %q, want %q", cz.KubeletConfig.Policy, policy)
	}
}

// namespace creates ns and waits for its default ServiceAccount, which pods
// need and the controller manager creates.
func (b *bed) namespace(t *testing.T, ns string) {
	t.Helper()
	b.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	testbed.Eventually(t, time.Minute, "the default ServiceAccount of "+ns, func() error {
		return b.node.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	})
}

func (b *bed) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := b.node.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// runPod creates a pod in ns that runs img with pull policy (when empty,
// the default: IfNotPresent for a tag other than latest), naming the
// owner's pull secret when withSecret.
func (b *bed) runPod(t *testing.T, ns, name, img string, withSecret bool, policy corev1.PullPolicy) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			// The test bed's pods use the host's network (no pod network).
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: policy}},
		},
	}
	if withSecret {
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secretName}}
	}
	b.create(t, pod)
	return pod
}

// deletePod deletes the pod and waits until it is gone, so that the
// kubelet stops retrying its pulls.
func (b *bed) deletePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := b.node.Client.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, time.Minute, "pod "+pod.Namespace+"/"+pod.Name+" gone", func() error {
		err := b.node.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
}

// waitRunning waits until the pod runs, failing early when its image pull
// is refused.
func waitRunning(t *testing.T, b *bed, pod *corev1.Pod) {
	t.Helper()
	testbed.Eventually(t, 2*time.Minute, "pod "+pod.Namespace+"/"+pod.Name+" running", func() error {
		p := b.get(t, pod)
		if reason := waitingReason(p); isPullRefusal(reason) {
			t.Fatalf("pod %s/%s: image pull refused (%s): %s\nevents: %s", p.Namespace, p.Name, reason,
				p.Status.ContainerStatuses[0].State.Waiting.Message, b.events(t, pod))
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, waiting %q; events: %s", p.Status.Phase, waitingReason(p), b.events(t, pod))
		}
		return nil
	})
}

// waitPullRefused waits until the pod's container waits on a refused image
// pull, and fails if it ever runs.
func waitPullRefused(t *testing.T, b *bed, pod *corev1.Pod) {
	t.Helper()
	testbed.Eventually(t, 2*time.Minute, "pod "+pod.Namespace+"/"+pod.Name+" refused its image", func() error {
		p := b.get(t, pod)
		if p.Status.Phase == corev1.PodRunning {
			t.Fatalf("pod %s/%s runs the private image without its secret", p.Namespace, p.Name)
		}
		if reason := waitingReason(p); !isPullRefusal(reason) {
			return fmt.Errorf("phase %s, waiting %q; events: %s", p.Status.Phase, reason, b.events(t, pod))
		}
		return nil
	})
}

func (b *bed) get(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := b.node.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// waitingReason is why the pod's container waits, or "".
func waitingReason(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Waiting.Reason
}

// isPullRefusal: the kubelet's reasons for a container whose image it
// could not (or would not) get.
func isPullRefusal(reason string) bool {
	return slices.Contains([]string{"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"}, reason)
}

// wantEvent fails unless the kubelet recorded an event with reason about
// the pod whose message contains text.
func (b *bed) wantEvent(t *testing.T, pod *corev1.Pod, reason, text string) {
	t.Helper()
	testbed.Eventually(t, 30*time.Second, fmt.Sprintf("a %s event with %q about %s", reason, text, pod.Name), func() error {
		for _, e := range b.node.PodEvents(t, pod) {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return nil
			}
		}
		return fmt.Errorf("events: %s", b.events(t, pod))
	})
}

// events renders the pod's events for a failure message.
func (b *bed) events(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var lines []string
	for _, e := range b.node.PodEvents(t, pod) {
		lines = append(lines, e.Reason+": "+e.Message)
	}
	return "[" + strings.Join(lines, "; ") + "]"
}

// manifestRequests and blobRequests count the registry requests for
// manifests and for blobs (layers and configs).
func manifestRequests(reqs []faults.ProxyRequest) int {
	return countPaths(reqs, "/manifests/")
}

func blobRequests(reqs []faults.ProxyRequest) int { return countPaths(reqs, "/blobs/") }

func countPaths(reqs []faults.ProxyRequest, part string) int {
	n := 0
	for _, r := range reqs {
		if strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

// paths renders requests as "METHOD path", for failure messages.
func paths(reqs []faults.ProxyRequest) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Method + " " + r.Path
	}
	return out
}
