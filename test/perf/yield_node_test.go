package perf

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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

// BenchmarkRealKubeletBesideWarm is BenchmarkKubeletBesideWarm on the
// real node: the pod's pull is the kubelet's own, for a Pod created with
// an image it does not have, timed by the kubelet itself (its Pulled
// event says "in <duration>"). The node reaches the registry as ghcr.io,
// through the same 32 MB/s link as the warmed images. The agent runs
// beside the kubelet as a process, without the kubelet's stats (the disk
// guard plays no part here). Run under BENCH_FULL=1 (make bench).
func BenchmarkRealKubeletBesideWarm(b *testing.B) {
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "yieldnode"})
	link := faults.StartLinkProxy(b, reg.Host, linkRate)
	n := testbed.StartNode(b, testbed.NodeOptions{Mirrors: map[string]string{"ghcr.io": link.Host}})
	round := 0
	// Every mode of every round pulls images never pulled before: an image
	// containerd 2.x's CRI removed leaves its layers to a later garbage
	// collection, and a pull that found them took 20 ms.
	fresh := func() (string, []string) {
		round++
		reg.PushRandom(b, fmt.Sprintf("perf/pod%d:v1", round), testbed.ImageOptions{LayerSize: 96 * testbed.MB})
		var warm []string
		for i := range 10 {
			reg.PushRandom(b, fmt.Sprintf("perf/warm%d-%d:v1", round, i), testbed.ImageOptions{LayerSize: 24 * testbed.MB})
			warm = append(warm, fmt.Sprintf("ghcr.io/perf/warm%d-%d:v1", round, i))
		}
		return fmt.Sprintf("ghcr.io/perf/pod%d:v1", round), warm
	}
	s := &besideWarm{cp: n.ControlPlane, bin: testbed.BuildPlainWarmer(b), node: n.Name, ctd: n.Containerd,
		agentFlags: []string{"--kubelet-address="}, fresh: fresh, link: link, bytes: 96*testbed.MB + 10*24*testbed.MB}
	s.podPull = func() time.Duration { return kubeletPull(b, n, s.pod) }
	runBesideWarm(b, s)
}

// pulledIn reads the kubelet's own time for a pull from its Pulled event.
var pulledIn = regexp.MustCompile(`Successfully pulled image "[^"]+" in ([^ ]+) \(`)

// kubeletPull creates a Pod of image (random layers: it pulls, then fails
// to start, which is all it is for), returns the pull time the kubelet
// reports, and deletes the Pod.
func kubeletPull(b *testing.B, n *testbed.RealNode, image string) time.Duration {
	b.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "pull-"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers:                    []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}},
		},
	}
	if err := n.Client.Create(ctx, pod); err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	eventually(b, 3*time.Minute, "the kubelet's Pulled event", func() error {
		for _, e := range n.PodEvents(b, pod) {
			if m := pulledIn.FindStringSubmatch(e.Message); e.Reason == "Pulled" && m != nil {
				d, err := time.ParseDuration(m[1])
				if err != nil {
					b.Fatalf("Pulled event %q: %v", e.Message, err)
				}
				took = d
				return nil
			}
		}
		return fmt.Errorf("events %q", testbed.EventLines(n.PodEvents(b, pod)))
	})
	if err := n.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		b.Fatal(err)
	}
	eventually(b, 2*time.Minute, "the pod gone", func() error {
		err := n.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
	return took
}
