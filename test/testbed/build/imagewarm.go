package build

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// ImageWarmOption sets one part of an ImageWarm that ImageWarm builds.
// Options apply in order; any func(*warmv1.ImageWarm) is one, for a field
// no option here sets.
type ImageWarmOption func(*warmv1.ImageWarm)

// ImageWarm builds the ImageWarm ns/name, with what opts set: no images
// and no node selector (every node) unless they say otherwise.
//
//	build.ImageWarm(ns, "web", build.Images(a.Ref, b.Ref), build.MatchLabel("pool", "web"))
func ImageWarm(ns, name string, opts ...ImageWarmOption) *warmv1.ImageWarm {
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range opts {
		o(iw)
	}
	return iw
}

// Images adds refs to the ImageWarm's images, in order.
func Images(refs ...string) ImageWarmOption {
	return func(iw *warmv1.ImageWarm) {
		for _, r := range refs {
			iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(r))
		}
	}
}

// Selector sets the labels the selected nodes must carry, all of them, to
// matchLabels; nil leaves the selector as it was (by default none: every
// node).
func Selector(matchLabels map[string]warmv1.LabelValue) ImageWarmOption {
	return func(iw *warmv1.ImageWarm) {
		if matchLabels == nil {
			return
		}
		if iw.Spec.NodeSelector == nil {
			iw.Spec.NodeSelector = &warmv1.NodeSelector{}
		}
		iw.Spec.NodeSelector.MatchLabels = maps.Clone(matchLabels)
	}
}

// MatchLabel adds key=value to the labels the selected nodes must carry.
func MatchLabel(key, value string) ImageWarmOption {
	return func(iw *warmv1.ImageWarm) {
		if iw.Spec.NodeSelector == nil {
			iw.Spec.NodeSelector = &warmv1.NodeSelector{}
		}
		if iw.Spec.NodeSelector.MatchLabels == nil {
			iw.Spec.NodeSelector.MatchLabels = map[string]warmv1.LabelValue{}
		}
		iw.Spec.NodeSelector.MatchLabels[key] = warmv1.LabelValue(value)
	}
}
