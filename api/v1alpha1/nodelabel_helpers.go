package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The node label of spec.nodeLabel. Its key is derived from the
// ImageWarm's namespace and name alone, so the agent that writes it, the
// policy that bounds the agent's writes and a workload that prefers warm
// nodes all name it without asking anyone: <namespace>.warm.warmer.dev/<name>.
// The namespace is in the key's prefix, which a tenant cannot choose, so no
// team's ImageWarm can set or clear another team's label.

// NodeLabelDomain is the suffix of every warm label's prefix; the agents'
// Node policy (config/policy/agent_node_taint_policy.yaml) lets an agent
// change only labels under it.
const NodeLabelDomain = "warm.warmer.dev"

// NodeLabelValue is the value of a warm label: the node holds every image.
const NodeLabelValue = "true"

// nodeLabelNameMax is the longest name part of a label key; nodeLabelCut
// is how much of a longer name is kept before its hash.
const (
	nodeLabelNameMax = 63
	nodeLabelCut     = 50
)

// NodeLabelKey is the key of the label the ImageWarm namespace/name puts
// on the nodes that hold all its images. A namespace is a DNS label (at
// most 63 characters), so the prefix stays within its 253. A name of at
// most 63 characters is the key's name part as it is; a longer one is cut
// to 50 characters and followed by "-" and 12 hex digits of the whole
// name's SHA-256, so two long names that share their first 50 characters
// still get two keys.
func NodeLabelKey(namespace, name string) string {
	part := name
	if len(name) > nodeLabelNameMax {
		sum := sha256.Sum256([]byte(name))
		part = name[:nodeLabelCut] + "-" + hex.EncodeToString(sum[:])[:nodeLabelNameMax-nodeLabelCut-1]
	}
	return namespace + "." + NodeLabelDomain + "/" + part
}

// NodeLabelKey is the key of the label this ImageWarm's spec.nodeLabel
// puts on the nodes that hold all its images.
func (w *ImageWarm) NodeLabelKey() string {
	return NodeLabelKey(w.Namespace, w.Name)
}

// IsNodeLabelKey says whether a Node label's key is a warm label's: its
// prefix is one DNS label followed by NodeLabelDomain. The agent removes
// such labels from its Node when no ImageWarm it warms wants them.
func IsNodeLabelKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	ns, ok := strings.CutSuffix(prefix, "."+NodeLabelDomain)
	return ok && ns != "" && !strings.Contains(ns, ".")
}
