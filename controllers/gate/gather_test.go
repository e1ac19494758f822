package gate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func TestNodeState(t *testing.T) {
	const app, side = "docker.io/library/app:v2", "docker.io/library/side:v1"
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "iw", Generation: 3}}
	nw := func(warmGen int64, images ...warmv1.NodeImage) *warmv1.NodeWarm {
		return &warmv1.NodeWarm{Status: warmv1.NodeWarmStatus{
			Warms:  []warmv1.WarmRef{{Namespace: "web", Name: "iw", Generation: warmGen}},
			Images: images}}
	}
	img := func(image string, state warmv1.ImageState, reason string) warmv1.NodeImage {
		return warmv1.NodeImage{Image: image, State: state, Reason: reason}
	}
	cases := []struct {
		name string
		nw   *warmv1.NodeWarm
		want NodeState
	}{
		{"no report", nil, NodeState{Name: "n"}},
		{"every image present", nw(3, img(app, warmv1.ImagePresent, ""), img(side, warmv1.ImagePresent, "")), NodeState{Name: "n", Warm: true}},
		{"one pulling", nw(3, img(app, warmv1.ImagePresent, ""), img(side, warmv1.ImagePulling, "")), NodeState{Name: "n", Coming: true}},
		{"one queued for a wave", nw(3, img(app, warmv1.ImageQueued, warmv1.ReasonWaitingForRollout), img(side, warmv1.ImagePresent, "")), NodeState{Name: "n", Coming: true}},
		{"agent behind the ImageWarm", nw(2, img(side, warmv1.ImagePresent, "")), NodeState{Name: "n", Coming: true}},
		{"failed, may retry", nw(3, img(app, warmv1.ImageBackOff, warmv1.ReasonNotFound), img(side, warmv1.ImagePresent, "")), NodeState{Name: "n"}},
		{"no room for it", nw(3, img(app, warmv1.ImageSkipped, warmv1.ReasonDiskPressure), img(side, warmv1.ImagePresent, "")), NodeState{Name: "n", Refused: app + " DiskPressure"}},
		{"an artifact its runtime cannot mount", nw(3, img(app, warmv1.ImageFailed, warmv1.ReasonArtifactsUnsupported), img(side, warmv1.ImagePresent, "")), NodeState{Name: "n", Refused: app + " ArtifactsUnsupported"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := nodeState("n", c.nw, iw, []string{app, side}); got != c.want {
				t.Errorf("nodeState = %+v; want %+v", got, c.want)
			}
		})
	}
}

func TestEligible(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "web"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "warmer.dev/warming", Effect: corev1.TaintEffectNoSchedule}}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "web"}}}
	if eligible(pod, node) {
		t.Error("a Pod that does not tolerate the node's NoSchedule taint is eligible")
	}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "warmer.dev/warming", Operator: corev1.TolerationOpExists}}
	if !eligible(pod, node) {
		t.Error("a Pod that matches and tolerates the node is not eligible")
	}
	pod.Spec.NodeSelector["pool"] = "batch"
	if eligible(pod, node) {
		t.Error("a Pod whose node selector does not match is eligible")
	}
}

func TestTrimPodKeepsWhatTheGateReads(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "web",
		Labels:      map[string]string{LabelImageWarm: "iw", "big": "x"},
		Annotations: map[string]string{AnnotationDeadline: "5m", "kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: GateName}},
			Containers: []corev1.Container{{Name: "app", Image: "app:v2", Command: []string{"run"}}}}}
	out, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if !gated(got) || deadlineOf(got.Annotations) != 5*time.Minute || len(got.Labels) != 1 || len(got.Annotations) != 1 ||
		got.Spec.Containers[0].Image != "app:v2" || got.Spec.Containers[0].Command != nil {
		t.Errorf("trimmed Pod %+v", got)
	}
}
