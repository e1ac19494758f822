package docs

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// ensureNamespace makes namespace ns exist with the wanted labels, and
// with no other label of labelPrefix, so that a sample is judged by the
// labels its own file gives and not by what an earlier sample set.
// Namespaces are never deleted: the test bed runs no namespace
// controller to finish that.
func (a *applier) ensureNamespace(t *testing.T, ns string, wanted map[string]string) {
	t.Helper()
	ctx := context.Background()
	var cur corev1.Namespace
	err := a.cp.Client.Get(ctx, namespaceKey(ns), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := a.cp.Client.Create(ctx, newNamespace(ns, wanted)); err != nil {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
		a.settled[ns] = false
	case err != nil:
		t.Fatalf("reading namespace %s: %v", ns, err)
	default:
		labels := maps.Clone(cur.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.DeleteFunc(labels, func(k, _ string) bool { return strings.HasPrefix(k, labelPrefix) })
		maps.Copy(labels, wanted)
		if !maps.Equal(labels, cur.Labels) {
			cur.Labels = labels
			if err := a.cp.Client.Update(ctx, &cur); err != nil {
				t.Fatalf("labelling namespace %s %v: %v", ns, wanted, err)
			}
			a.settled[ns] = false
		}
	}
	a.settle(t, ns)
}

// applyNamespace applies a Namespace the sample shows, server-side, since
// several samples may show the same one.
func (a *applier) applyNamespace(t *testing.T, d document, obj *unstructured.Unstructured) {
	t.Helper()
	err := a.cp.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		t.Errorf("%s: %s: %v", d.where, describe(obj), err)
	}
	a.settled[obj.GetName()] = false
	a.settle(t, obj.GetName())
}

// settle waits until the levers policy sees namespace ns's labels as they
// are: it reads them from the API server's cache, a moment behind a
// write, and a sample must not pass or fail by that timing. A dry-run
// ImageWarm with retention Pinned is the probe: allowed exactly when the
// namespace carries the levers label.
func (a *applier) settle(t *testing.T, ns string) {
	t.Helper()
	if a.settled[ns] {
		return
	}
	ctx := context.Background()
	var cur corev1.Namespace
	if err := a.cp.Client.Get(ctx, namespaceKey(ns), &cur); err != nil {
		t.Fatalf("reading namespace %s: %v", ns, err)
	}
	allowed := cur.Labels[leversLabel] == "allowed"
	testbed.Eventually(t, 30*time.Second, fmt.Sprintf("the levers policy seeing namespace %s's labels %v", ns, cur.Labels), func() error {
		probe := &warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docstest-probe"},
			Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"registry.invalid/probe:v1"}, Retention: warmv1.RetentionPinned},
		}
		err := a.cp.Client.Create(ctx, probe, client.DryRunAll)
		denied := err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+leversPolicy+"'")
		switch {
		case allowed && err != nil:
			return fmt.Errorf("a Pinned ImageWarm is refused: %w", err)
		case !allowed && err == nil:
			return fmt.Errorf("a Pinned ImageWarm is allowed, not refused by %s", leversPolicy)
		case !allowed && !denied:
			return fmt.Errorf("a Pinned ImageWarm is refused, but not by %s: %w", leversPolicy, err)
		}
		return nil
	})
	a.settled[ns] = true
}
