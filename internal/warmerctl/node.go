package warmerctl

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// NodeReport is what one node holds for whom.
type NodeReport struct {
	Node            string                  `json:"node"`
	Runtime         warmv1.RuntimeInfo      `json:"runtime"`
	ImageFilesystem *warmv1.ImageFilesystem `json:"imageFilesystem,omitempty"`
	Conditions      []metav1.Condition      `json:"conditions,omitempty"`
	Desired         int32                   `json:"desired"`
	Present         int32                   `json:"present"`
	Pulling         int32                   `json:"pulling"`
	Failed          int32                   `json:"failed"`
	ServedStarts    int32                   `json:"servedStarts"`
	Progress        string                  `json:"progress,omitempty"`
	Warms           []warmv1.WarmRef        `json:"warms,omitempty"`
	Images          []NodeImage             `json:"images,omitempty"`
}

// NodeImage is one image on the node, with the ImageWarms that want it.
type NodeImage struct {
	Image            string               `json:"image"`
	SecretsNamespace string               `json:"secretsNamespace,omitempty"`
	State            warmv1.ImageState    `json:"state"`
	Digest           string               `json:"digest,omitempty"`
	Pinned           bool                 `json:"pinned,omitempty"`
	Verified         bool                 `json:"verified,omitempty"`
	Reason           string               `json:"reason,omitempty"`
	Message          string               `json:"message,omitempty"`
	Attempts         int32                `json:"attempts,omitempty"`
	Progress         *warmv1.PullProgress `json:"progress,omitempty"`
	Since            *metav1.Time         `json:"since,omitempty"`
	WantedBy         []string             `json:"wantedBy,omitempty"`
}

// ReportNode folds one NodeWarm into a NodeReport: images being pulled
// first, then failing ones, then the rest, each by reference.
func ReportNode(nw *warmv1.NodeWarm) NodeReport {
	st := &nw.Status
	r := NodeReport{
		Node: nw.Name, Runtime: st.Runtime, ImageFilesystem: st.ImageFilesystem,
		Conditions: st.Conditions, Desired: st.Desired, Present: st.Present,
		Pulling: st.Pulling, Failed: st.Failed, ServedStarts: st.ServedStarts,
		Progress: st.Progress, Warms: st.Warms,
	}
	for i := range st.Images {
		img := &st.Images[i]
		ni := NodeImage{
			Image: img.Image, SecretsNamespace: img.SecretsNamespace, State: img.State,
			Digest: img.Digest, Pinned: img.Pinned, Verified: img.Verified,
			Reason: img.Reason, Message: img.Message, Attempts: img.Attempts,
			Progress: img.Progress, Since: img.LastTransitionTime,
		}
		for _, w := range st.RequestedBy(img) {
			ni.WantedBy = append(ni.WantedBy, w.Namespace+"/"+w.Name)
		}
		r.Images = append(r.Images, ni)
	}
	slices.SortStableFunc(r.Images, func(a, b NodeImage) int {
		return stateRank(a.State) - stateRank(b.State)
	})
	return r
}

var stateOrder = []warmv1.ImageState{warmv1.ImagePulling, warmv1.ImageFailed, warmv1.ImageBackOff,
	warmv1.ImageQueued, warmv1.ImageSkipped, warmv1.ImagePresent}

func stateRank(s warmv1.ImageState) int { return slices.Index(stateOrder, s) }
