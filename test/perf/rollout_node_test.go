package perf

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/gate"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// rolloutImageSize is the random layer of each new image in
// BenchmarkRealNodeRollout, which the node's link (linkRate) takes about
// a second and a half to carry.
const rolloutImageSize = 48 * testbed.MB

// BenchmarkRealNodeRollout times, on the real node (kube-controller-manager,
// kube-scheduler, the kubelet on containerd 2.x) with warmer installed
// from config/default and config/components/warm-gate, a rollout of one
// replica to a new image: from the Deployment's update to its new Pod
// Running. Two Deployments of one replica each, both read by one
// ImageWarm's imagesFrom, are rolled in turn each round, each to an image
// no one has pulled (48 MB through the node's 32 MB/s link): "gated"
// opts in to the warm gate (its Pod waits for the agent's pull, then
// starts without one), "ungated" does not (its Pod is bound at once and
// the kubelet pulls beside the agent). Run under BENCH_FULL=1 (make bench).
func BenchmarkRealNodeRollout(b *testing.B) {
	reg := testbed.StartRegistry(b, testbed.RegistryOptions{Name: "rolloutnode"})
	link := faults.StartLinkProxy(b, reg.Host, linkRate)
	n := testbed.StartNode(b, testbed.NodeOptions{Mirrors: map[string]string{"ghcr.io": link.Host}})
	testbed.InstallOnNode(b, n, "v0.0.0-perf", "config/components/warm-gate")
	testbed.WaitGateArmed(b, n.ControlPlane, "default")
	r := &nodeRollout{b: b, n: n, reg: reg}
	r.create(&warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rollout"}, Spec: warmv1.ImageWarmSpec{
		ImagesFrom: &warmv1.ImagesFrom{WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"bench": "rollout"}}}}})
	modes := []string{"gated", "ungated"}
	for _, mode := range modes {
		r.create(rolloutDeployment(mode, r.fresh(), mode == "gated"))
		r.settle(mode)
	}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first, so that neither always follows the
		// other's old Pod going.
		order := slices.Clone(modes)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			took, pod := r.roll(mode, r.fresh())
			times[mode] = append(times[mode], took)
			pulled := slices.ContainsFunc(n.PodEvents(b, pod), func(e corev1.Event) bool { return e.Reason == "Pulling" })
			if mode == "gated" && (pulled || !releasedWarm(pod)) {
				b.Errorf("round %d: the gated Pod pulled (%v) or was not released warm: %+v", i, pulled, pod.Status.Conditions)
			}
			if mode == "ungated" && !pulled {
				b.Logf("round %d: the ungated Pod found its image warm (the agent won the race)", i)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for _, mode := range modes {
		m := median(times[mode])
		b.ReportMetric(m.Seconds(), "s-running-"+mode)
		b.Logf("%-8s rollout start to Pod Running: median %v (rounds %v)", mode, m.Round(10*time.Millisecond), times[mode])
	}
}

// nodeRollout holds what the rounds of BenchmarkRealNodeRollout share.
type nodeRollout struct {
	b      *testing.B
	n      *testbed.RealNode
	reg    *testbed.Registry
	images int
}

// fresh pushes a runnable image no one has pulled and returns its name
// as the node knows it.
func (r *nodeRollout) fresh() string {
	r.images++
	layers, err := testbed.RandomImage(r.b, testbed.ImageOptions{LayerSize: rolloutImageSize}).Layers()
	if err != nil {
		r.b.Fatal(err)
	}
	img, err := mutate.AppendLayers(testbed.AppImage(r.b), layers...)
	if err != nil {
		r.b.Fatal(err)
	}
	repoTag := fmt.Sprintf("perf/rollout:v%d", r.images)
	r.reg.Push(r.b, repoTag, img)
	return "ghcr.io/" + repoTag
}

// roll sets the Deployment's image and returns the time until its new Pod
// runs, and the Pod.
func (r *nodeRollout) roll(name, image string) (time.Duration, *corev1.Pod) {
	ctx := context.Background()
	var d appsv1.Deployment
	if err := r.n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &d); err != nil {
		r.b.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = image
	start := time.Now()
	if err := r.n.Client.Update(ctx, &d); err != nil {
		r.b.Fatal(err)
	}
	var pod *corev1.Pod
	testbed.Poll(r.b, 50*time.Millisecond, 3*time.Minute, name+"'s new Pod running", func() error {
		pod = r.podOf(name, image)
		if pod == nil || pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %v", pod != nil)
		}
		return nil
	})
	took := time.Since(start)
	r.settle(name)
	return took, pod
}

// releasedWarm says the warm gate held the Pod and let it go warm.
func releasedWarm(pod *corev1.Pod) bool {
	c := testbed.WarmCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue && c.Reason == gate.ReasonWarm
}

// podOf is the Deployment's Pod of image, or nil.
func (r *nodeRollout) podOf(name, image string) *corev1.Pod {
	var pods corev1.PodList
	if err := r.n.Client.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": name}); err != nil {
		r.b.Fatal(err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image {
			return p
		}
	}
	return nil
}

// settle waits until the Deployment has rolled out whole and its old Pods
// are gone, so that a round starts from one running Pod.
func (r *nodeRollout) settle(name string) {
	ctx := context.Background()
	eventually(r.b, 3*time.Minute, name+" rolled out", func() error {
		var d appsv1.Deployment
		if err := r.n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &d); err != nil {
			return err
		}
		var pods corev1.PodList
		if err := r.n.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		if st := d.Status; st.ObservedGeneration != d.Generation || st.UpdatedReplicas != 1 || st.AvailableReplicas != 1 || len(pods.Items) != 1 {
			return fmt.Errorf("status %+v, %d Pods", st, len(pods.Items))
		}
		return nil
	})
}

func (r *nodeRollout) create(obj client.Object) {
	if err := r.n.Client.Create(context.Background(), obj); err != nil {
		r.b.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

// rolloutDeployment is one replica of image, read by the ImageWarm's
// imagesFrom (label bench=rollout), its template opted in to the gate on
// that ImageWarm when gated.
func rolloutDeployment(name, image string, gated bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	if gated {
		labels[gate.LabelImageWarm] = "rollout"
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"bench": "rollout"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}},
				},
			},
		},
	}
}
