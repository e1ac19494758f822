package plan

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// criORuntimeName is the name CRI-O gives in its CRI Version answer.
const criORuntimeName = "cri-o"

// mountsArtifacts says whether the runtime mounts an OCI artifact's blobs
// as an image volume. CRI-O does (oci_artifact_mount_support, on by
// default). containerd does not: 1.6 fails the pull after recording the
// image, and 2.x pulls it but unpacks only layers of image media types,
// so the volume would hold none of the artifact's files. A runtime not
// known to mount them is taken as one that does not: a warm the Pod
// cannot use would read as done.
func mountsArtifacts(rt warmv1.RuntimeInfo) bool { return rt.Name == criORuntimeName }

// artifactHeld says whether w is an artifact the node's runtime cannot
// mount, or whose runtime has not said its name yet: it is not pulled.
func (p *planner) artifactHeld(w *wantedImage) bool {
	return w.artifact && !mountsArtifacts(p.in.RuntimeInfo)
}

// heldArtifact decides an artifact that is not pulled here: reported
// Failed with ArtifactsUnsupported, for good (no pull, no back-off, no
// retry), or Queued while the runtime's name is unknown. It is never done,
// so its ImageWarms get no Warmed event from this node, as an image of
// another platform does not.
func (p *planner) heldArtifact(key string, w *wantedImage) warmv1.NodeImage {
	m := p.out.State.images[key]
	img := warmv1.NodeImage{Image: w.refKey, SecretsNamespace: w.scope, Warms: p.warmIndices(w.warms),
		State: warmv1.ImageFailed, Reason: warmv1.ReasonArtifactsUnsupported, Message: statusMessage(artifactMessage(p.in.RuntimeInfo))}
	if p.in.RuntimeInfo.Name == "" {
		img.State, img.Reason, img.Message = warmv1.ImageQueued, "", "an OCI artifact: pulled once the runtime says its name, if it can mount artifacts"
	}
	if p.in.PerImageEvents && img.State == warmv1.ImageFailed && m.state != warmv1.ImageFailed {
		p.event(eventFailed(w, pull.Result{Class: pull.ClassArtifactsUnsupported, Message: img.Message}))
	}
	if img.State != m.state || m.since.IsZero() {
		m.state, m.since = img.State, metav1.NewTime(p.in.Now)
	}
	img.LastTransitionTime = transitionTime(img.State, m.since)
	p.out.State.images[key] = m
	return img
}

// artifactWaitStatus says why an artifact waits while another is pulled.
const artifactWaitStatus = "waiting for another artifact's pull: the runtime keeps only one of the artifacts pulled side by side"

// artifactPulling is the reference of an artifact of the desired set
// that the engine is pulling, or has queued; "" for none.
func (p *planner) artifactPulling() string {
	for _, key := range p.in.Desired.Keys() {
		w := p.in.Desired.images[key]
		if st, ok := p.in.Engine[w.refKey]; ok && w.artifact && (st.State == pull.StateQueued || st.State == pull.StatePulling) {
			return w.refKey
		}
	}
	return ""
}

// artifactTurn says whether w may be pulled now, as far as artifacts go:
// one artifact at a time. CRI-O 1.34 keeps its artifacts in one OCI
// layout whose index each pull rewrites at its end without a lock: of
// artifacts pulled side by side, all pulls succeed and only one stays
// (TestRuntimesOnArtifacts). An image, or an artifact already under way,
// always may; the others wait, in the order of the set's keys, and say
// so in their status.
func (p *planner) artifactTurn(w *wantedImage, v imageView) bool {
	if !w.artifact || v.inFlight || p.artifactSlot == w.refKey {
		return true
	}
	if p.artifactSlot != "" {
		p.artifactWaits[w.key] = true
		return false
	}
	p.artifactSlot = w.refKey
	return true
}

// artifactMessage says why an artifact is not pulled on a runtime that
// cannot mount it.
func artifactMessage(rt warmv1.RuntimeInfo) string {
	return fmt.Sprintf("an OCI artifact, and this node's runtime (%s %s) cannot mount artifacts as image volumes "+
		"(CRI-O can): not pulled here", rt.Name, rt.Version)
}
