package gate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// Deadlines: the default, and the most a Pod may ask, so that no template
// holds its Pods back for long.
const (
	DefaultDeadline = 10 * time.Minute
	MaxDeadline     = time.Hour
)

// gather reads what Decide needs about one gated Pod.
func (r *Reconciler) gather(ctx context.Context, pod *corev1.Pod) (Input, error) {
	in := Input{Now: r.Clock.Now(), Created: pod.CreationTimestamp.Time, Deadline: deadlineOf(pod.Annotations)}
	if v, ok := pod.Annotations[AnnotationDeadline]; ok && !ValidDeadline(v) {
		in.Note = fmt.Sprintf("annotation %s=%q is not a duration from 0 to %v: waited %v", AnnotationDeadline, v, MaxDeadline, in.Deadline)
	}
	var iw warmv1.ImageWarm
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Labels[LabelImageWarm]}, &iw)
	if apierrors.IsNotFound(err) {
		return in, nil
	}
	if err != nil {
		return in, err
	}
	in.ImageWarmFound = true
	images := podImages(pod)
	in.Unlisted = unlisted(images, warmedImages(&iw))
	if len(in.Unlisted) > 0 {
		return in, nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return in, err
	}
	var warms warmv1.NodeWarmList
	if err := r.Client.List(ctx, &warms); err != nil {
		return in, err
	}
	byNode := make(map[string]*warmv1.NodeWarm, len(warms.Items))
	for i := range warms.Items {
		byNode[warms.Items[i].Name] = &warms.Items[i]
	}
	for i := range nodes.Items {
		if eligible(pod, &nodes.Items[i]) {
			in.Nodes = append(in.Nodes, nodeState(nodes.Items[i].Name, byNode[nodes.Items[i].Name], &iw, images))
		}
	}
	return in, nil
}

// deadlineOf reads the Pod's deadline annotation: the default when absent
// or not a duration, at most MaxDeadline, at least zero.
func deadlineOf(annotations map[string]string) time.Duration {
	d, err := time.ParseDuration(annotations[AnnotationDeadline])
	if err != nil {
		return DefaultDeadline
	}
	return min(max(d, 0), MaxDeadline)
}

// ValidDeadline says value is a duration the gate takes as written (the
// admission policy warmer-warm-gate-deadline holds new Pods to it).
func ValidDeadline(value string) bool {
	d, err := time.ParseDuration(value)
	return err == nil && d >= 0 && d <= MaxDeadline
}

// podImages are the Pod's container and init container images, normalised
// as nodes report them.
func podImages(pod *corev1.Pod) []string {
	var out []string
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if k := key(c.Image); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// key is the normalised reference, or the image itself when it does not
// parse (as agents report it).
func key(image string) string {
	ref, err := imageref.Parse(image)
	if err != nil {
		return image
	}
	return ref.String()
}

// warmedImages are the images the ImageWarm warms, normalised.
func warmedImages(iw *warmv1.ImageWarm) []string {
	var out []string
	for _, ref := range iw.Spec.Images {
		out = append(out, key(string(ref)))
	}
	for _, image := range iw.ResolvedImages() {
		out = append(out, key(image))
	}
	for _, ref := range iw.Spec.Artifacts {
		out = append(out, key(string(ref)))
	}
	return out
}

func unlisted(images, warmed []string) []string {
	var out []string
	for _, image := range images {
		if !slices.Contains(warmed, image) {
			out = append(out, image)
		}
	}
	return out
}

// eligible says whether the scheduler could place the Pod on node, as far
// as labels and taints go (resources are the scheduler's business).
func eligible(pod *corev1.Pod, node *corev1.Node) bool {
	if node.Spec.Unschedulable || node.DeletionTimestamp != nil {
		return false
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// nodeState is how far the node is with images, from its NodeWarm (nil:
// no agent report).
func nodeState(name string, nw *warmv1.NodeWarm, iw *warmv1.ImageWarm, images []string) NodeState {
	s := NodeState{Name: name}
	if nw == nil {
		return s
	}
	present := 0
	for _, image := range images {
		i := slices.IndexFunc(nw.Status.Images, func(ni warmv1.NodeImage) bool { return ni.Image == image })
		if i < 0 {
			continue
		}
		ni := nw.Status.Images[i]
		switch ni.State {
		case warmv1.ImagePresent:
			present++
		case warmv1.ImagePulling, warmv1.ImageQueued:
			s.Coming = true
		case warmv1.ImageFailed, warmv1.ImageSkipped:
			if refusedForGood(ni.Reason) {
				s.Refused = image + " " + ni.Reason
			}
		}
	}
	s.Warm = present == len(images)
	if !s.Warm && !s.Coming {
		s.Coming = behind(nw, iw)
	}
	return s
}

// refusedForGood are the node reasons that waiting does not cure: the
// image does not fit the node's disk, has no build for it, or is an
// artifact its runtime cannot mount.
func refusedForGood(reason string) bool {
	return reason == warmv1.ReasonDiskPressure || reason == warmv1.ReasonNoMatchingPlatform ||
		reason == warmv1.ReasonArtifactsUnsupported
}

// behind says the node's agent acts on an older view of the ImageWarm
// (another generation or resolved set): it has yet to queue the images.
func behind(nw *warmv1.NodeWarm, iw *warmv1.ImageWarm) bool {
	for _, w := range nw.Status.Warms {
		if w.Namespace == iw.Namespace && w.Name == iw.Name {
			return w.Generation != iw.Generation || w.Resolved != iw.ResolvedHash()
		}
	}
	return false
}
