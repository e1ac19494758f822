package credbundle

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DefaultNamespace is warmer's namespace in the shipped manifests.
	DefaultNamespace = "warmer-system"
	// Label marks a bundle, value "true"; the controller caches only
	// Secrets of its namespace with it.
	Label = "warmer.dev/credential-bundle"
	// NodeAnnotation names the node a bundle is for.
	NodeAnnotation = "warmer.dev/node"
	// KeyAnnotation is the Fingerprint of the key a bundle is sealed to.
	KeyAnnotation = "warmer.dev/key"
	// InputsAnnotation is a hash of what a bundle was sealed from: the
	// key, and each source's namespace, name and resourceVersion (or
	// problem), never secret data. The controller seals again only when
	// it changes.
	InputsAnnotation = "warmer.dev/inputs"
	// DataKey is the key of the sealed bundle in the Secret's data.
	DataKey = "bundle"
	// LegacyCopyLabel marks the per-secret copies earlier releases kept
	// in warmer's namespace; the controller deletes them once bundles are
	// in place.
	LegacyCopyLabel = "warmer.dev/pull-secret-copy"
)

// Name is the name of node's bundle: a prefix and a hash of the node's
// name, so no one but warmer chooses it and any node name fits.
func Name(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "warmer-creds-" + hex.EncodeToString(sum[:20])
}

// Secret is node's bundle in namespace ns, sealed to the key of
// fingerprint key from the given inputs.
func Secret(ns, node, key, inputs string, sealed []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        Name(node),
			Labels:      map[string]string{Label: "true"},
			Annotations: map[string]string{NodeAnnotation: node, KeyAnnotation: key, InputsAnnotation: inputs},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{DataKey: sealed},
	}
}

// NodeOf returns the node a bundle names, and false when s is not a
// bundle warmer wrote under that node's name.
func NodeOf(s *corev1.Secret) (string, bool) {
	node := s.Annotations[NodeAnnotation]
	return node, s.Labels[Label] == "true" && node != "" && s.Name == Name(node)
}
