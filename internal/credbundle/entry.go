package credbundle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Entry is what a bundle holds for one source Secret: the one key a pull
// reads, or the problem that kept it out. A problem names the source,
// never its content.
type Entry struct {
	// Type is the source's type, one of the two image pull secret types.
	Type corev1.SecretType `json:"type,omitempty"`
	// Data holds only the key a pull reads (.dockerconfigjson or
	// .dockercfg).
	Data map[string][]byte `json:"data,omitempty"`
	// Problem says why the source is not in the bundle: missing, of
	// another type, or not readable by warmer.
	Problem string `json:"problem,omitempty"`
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

// EntryOf is src's entry: its type and only the key a pull reads, or a
// problem when src is not an image pull secret or lacks that key.
func EntryOf(src *corev1.Secret) Entry {
	key, ok := Key(src.Type)
	if !ok {
		return Problem(fmt.Sprintf("pull secret %q has type %q; want %s or %s", src.Name, src.Type,
			corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg))
	}
	value, ok := src.Data[key]
	if !ok {
		return Problem(fmt.Sprintf("pull secret %q has no %s key", src.Name, key))
	}
	return Entry{Type: src.Type, Data: map[string][]byte{key: value}}
}

// Problem is the entry of a source that cannot be used, saying why.
func Problem(problem string) Entry {
	return Entry{Problem: problem}
}

// Bundle is what a node's bundle holds once opened: an entry per source
// Secret named by an ImageWarm that selects the node.
type Bundle struct {
	// Node is the node the bundle was sealed for; the seal binds it too.
	Node string `json:"node"`
	// Secrets are the entries by source, "namespace/name".
	Secrets map[string]Entry `json:"secrets,omitempty"`
}

// Entry returns the entry of source src, if the bundle holds one.
func (b *Bundle) Entry(src types.NamespacedName) (Entry, bool) {
	if b == nil {
		return Entry{}, false
	}
	e, ok := b.Secrets[src.String()]
	return e, ok
}

// Put sets the entry of source src.
func (b *Bundle) Put(src types.NamespacedName, e Entry) {
	if b.Secrets == nil {
		b.Secrets = map[string]Entry{}
	}
	b.Secrets[src.String()] = e
}
