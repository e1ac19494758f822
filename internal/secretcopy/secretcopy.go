// Package secretcopy is the contract between the controller, which copies
// the pull secrets ImageWarms name into warmer's own namespace, and the
// agents, which read only those copies. Agents therefore need a GET on
// Secrets of one namespace, not of the cluster: root on one node yields a
// token that reaches the pull secrets ImageWarms name, and nothing else.
//
// A copy's name is derived from its source's namespace and name, so no
// ImageWarm author chooses it and two sources never share one. A copy
// carries only the key a pull reads. When the controller cannot copy a
// source (missing, of another type, not readable by it), it writes a
// placeholder without data whose annotation says why, so the agents report
// the real cause rather than a missing copy.
package secretcopy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// DefaultNamespace is warmer's namespace in the shipped manifests.
	DefaultNamespace = "warmer-system"
	// Label marks a copy, value "true"; the controller watches only
	// Secrets of its namespace with it.
	Label = "warmer.dev/pull-secret-copy"
	// SourceNamespace and SourceName annotate a copy with its source.
	SourceNamespace = "warmer.dev/source-namespace"
	SourceName      = "warmer.dev/source-name"
	// Problem annotates a placeholder: why the source could not be copied.
	// It names the source, never its content.
	Problem = "warmer.dev/problem"
)

// Name is the name of the copy of src: a prefix and a hash of src's
// namespace and name (a Secret name may be 253 characters, so the two do
// not fit side by side).
func Name(src types.NamespacedName) string {
	sum := sha256.Sum256([]byte(src.Namespace + "/" + src.Name))
	return "warmer-pull-" + hex.EncodeToString(sum[:20])
}

// Key returns the data key a pull reads from a secret of type t, and
// whether t is one of the two image pull secret types.
func Key(t corev1.SecretType) (string, bool) {
	switch t {
	case corev1.SecretTypeDockerConfigJson:
		return corev1.DockerConfigJsonKey, true
	case corev1.SecretTypeDockercfg:
		return corev1.DockerConfigKey, true
	}
	return "", false
}

// Copy builds the copy of src in namespace ns: src's type and only the
// key a pull reads. It returns a placeholder naming the problem when src
// is not an image pull secret or lacks that key.
func Copy(src *corev1.Secret, ns string) *corev1.Secret {
	nn := types.NamespacedName{Namespace: src.Namespace, Name: src.Name}
	key, ok := Key(src.Type)
	if !ok {
		return Placeholder(nn, ns, fmt.Sprintf("pull secret %q has type %q; want %s or %s", src.Name, src.Type,
			corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg))
	}
	value, ok := src.Data[key]
	if !ok {
		return Placeholder(nn, ns, fmt.Sprintf("pull secret %q has no %s key", src.Name, key))
	}
	c := skeleton(nn, ns)
	c.Type = src.Type
	c.Data = map[string][]byte{key: value}
	return c
}

// Placeholder is the copy of src that says, instead of holding
// credentials, why src could not be copied.
func Placeholder(src types.NamespacedName, ns, problem string) *corev1.Secret {
	c := skeleton(src, ns)
	c.Type = corev1.SecretTypeOpaque
	c.Annotations[Problem] = problem
	return c
}

func skeleton(src types.NamespacedName, ns string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        Name(src),
			Labels:      map[string]string{Label: "true"},
			Annotations: map[string]string{SourceNamespace: src.Namespace, SourceName: src.Name},
		},
	}
}

// Source returns the source a copy names, and false when c is not a copy
// warmer wrote under that source's name.
func Source(c *corev1.Secret) (types.NamespacedName, bool) {
	nn := types.NamespacedName{Namespace: c.Annotations[SourceNamespace], Name: c.Annotations[SourceName]}
	if c.Labels[Label] != "true" || nn.Namespace == "" || nn.Name == "" || c.Name != Name(nn) {
		return nn, false
	}
	return nn, true
}

// Same says whether two copies hold the same type, data and annotations,
// so the controller writes only changes.
func Same(a, b *corev1.Secret) bool {
	if a.Type != b.Type || len(a.Data) != len(b.Data) || a.Annotations[Problem] != b.Annotations[Problem] {
		return false
	}
	for k, v := range a.Data {
		if string(b.Data[k]) != string(v) {
			return false
		}
	}
	_, okA := Source(a)
	_, okB := Source(b)
	return okA && okB
}
