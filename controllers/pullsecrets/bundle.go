package pullsecrets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/credbundle"
)

// inputs is what one node's bundle is made from; nil when the node has no
// bundle to have (no NodeWarm, no key, no Node).
type inputs struct {
	key     *warmv1.CredentialKey
	sources []types.NamespacedName
}

// gather reads the node's key and the sources its bundle holds. A node
// without a NodeWarm, a key or a Node has its bundle dropped.
func (b *Bundler) gather(ctx context.Context, node string) (*inputs, error) {
	var nw warmv1.NodeWarm
	err := b.Client.Get(ctx, types.NamespacedName{Name: node}, &nw)
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	if err != nil || nw.DeletionTimestamp != nil || nw.Status.CredentialKey == nil {
		return nil, b.drop(ctx, node)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if err := b.Client.Get(ctx, types.NamespacedName{Name: node}, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, b.drop(ctx, node)
		}
		return nil, err
	}
	var list warmv1.ImageWarmList
	if err := b.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return &inputs{key: nw.Status.CredentialKey, sources: Plan(meta.Labels, list.Items)}, nil
}

// write seals and writes the node's bundle when its inputs changed.
func (b *Bundler) write(ctx context.Context, node string, key warmv1.CredentialKey, read []result) error {
	sum := inputsHash(key, read)
	var have corev1.Secret
	err := b.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: credbundle.Name(node)}, &have)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	exists := err == nil
	if exists && have.Annotations[credbundle.InputsAnnotation] == sum {
		return nil
	}
	bundle := credbundle.Bundle{Node: node}
	for _, r := range read {
		bundle.Put(r.src, r.entry)
	}
	sealed, err := credbundle.Seal(node, key, &bundle)
	if err != nil {
		return fmt.Errorf("sealing node %q's credential bundle: %w", node, err)
	}
	want := credbundle.Secret(b.Namespace, node, credbundle.Fingerprint(key), sum, sealed)
	if exists {
		want.ResourceVersion = have.ResourceVersion
		err = b.Client.Update(ctx, want)
	} else {
		err = client.IgnoreAlreadyExists(b.Client.Create(ctx, want)) // the cache lagged; the watch brings it
	}
	if err == nil {
		log.FromContext(ctx).V(1).Info("Credential bundle sealed", "node", node, "secrets", len(read))
	}
	return err
}

// inputsHash stands for what a bundle is made from: the key, and each
// source's name and version (resourceVersion, or the kind of problem).
// Never secret data, so the annotation tells nothing about the content.
func inputsHash(key warmv1.CredentialKey, read []result) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", credbundle.Fingerprint(key))
	for _, r := range read {
		fmt.Fprintf(h, "%s\x00%s\n", r.src, r.version)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// drop deletes node's bundle, if the cache holds one: a node without a
// bundle costs no request.
func (b *Bundler) drop(ctx context.Context, node string) error {
	var s corev1.Secret
	err := b.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: credbundle.Name(node)}, &s)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := b.Client.Delete(ctx, &s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Credential bundle deleted", "node", node)
	return nil
}
