package perf

import (
	"context"
	"fmt"
	"regexp"
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
	reg.PushRandom(b, "perf/pod:v1", testbed.ImageOptions{LayerSize: 96 * testbed.MB})
	var warm []string
	for i := range 10 {
		reg.PushRandom(b, fmt.Sprintf("perf/warm%d:v1", i), testbed.ImageOptions{LayerSize: 24 * testbed.MB})
		warm = append(warm, fmt.Sprintf("ghcr.io/perf/warm%d:v1", i))
	}
	const pod = "ghcr.io/perf/pod:v1"
	runBesideWarm(b, besideWarm{cp: n.ControlPlane, bin: testbed.BuildPlainWarmer(b), node: n.Name, ctd: n.Containerd,
		pod: pod, warm: warm, podPull: func() time.Duration { return kubeletPull(b, n, pod) },
		agentFlags: []string{"--kubelet-address="}, remove: func(refs ...string) { removeSync(b, n.Containerd, refs) }})
}

// removeSync removes every name of the images refs name from containerd's
// k8s.io namespace (their tags, digests and IDs) and waits for its garbage
// collection: containerd 2.x's CRI RemoveImage leaves the layers to a
// later collection, and a pull that finds them there takes milliseconds.
func removeSync(b *testing.B, ctd *testbed.Containerd, refs []string) {
	b.Helper()
	out, err := ctd.Ctr("-n", "k8s.io", "images", "ls")
	if err != nil {
		b.Fatal(err)
	}
	byDigest := map[string][]string{}
	targets := map[string]bool{}
	for _, line := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		byDigest[f[2]] = append(byDigest[f[2]], f[0])
		if slices.Contains(refs, f[0]) {
			targets[f[2]] = true
		}
	}
	var names []string
	for d := range targets {
		names = append(names, byDigest[d]...)
	}
	if len(names) == 0 {
		return
	}
	if _, err := ctd.Ctr(append([]string{"-n", "k8s.io", "images", "rm", "--sync"}, names...)...); err != nil {
		b.Fatal(err)
	}
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
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	return took
}
