package docs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// fieldOwner is the manager of what this test writes.
const fieldOwner = "warmer-docstest"

// The one admission policy that reads a namespace's labels, and its label.
const (
	leversPolicy = "warmer-imagewarm-cluster-levers"
	leversLabel  = "warmer.dev/cluster-levers"
	// labelPrefix marks the labels the test sets and removes: a namespace
	// has exactly the ones of this prefix that the sample's file gives it.
	labelPrefix = "warmer.dev/"
)

// notAPIObjects are the groups of files the docs show that no API server
// serves, with the reason a sample of one is not applied. A sample of any
// other group the API server does not serve fails.
var notAPIObjects = map[string]string{
	"kustomize.config.k8s.io":           "a kustomization, read by kustomize, not an API object",
	"kubelet.config.k8s.io":             "a kubelet configuration file, not an API object",
	"credentialprovider.kubelet.k8s.io": "a kubelet credential provider file, not an API object",
	"apiserver.config.k8s.io":           "a kube-apiserver configuration file, not an API object",
	"audit.k8s.io":                      "a kube-apiserver audit policy file, not an API object",
	"monitoring.coreos.com":             "a Prometheus Operator object, whose CRDs the test bed does not install",
	"karpenter.sh":                      "a Karpenter object, whose CRDs the test bed does not install",
	"readiness.node.x-k8s.io":           "a Node Readiness Controller object, whose CRDs the test bed does not install",
}

// Reasons for documents that are not applied, besides notAPIObjects.
const (
	notMapping = "not a mapping: a list or scalar to paste into a larger file"
	fragment   = "no apiVersion and kind: a fragment to paste into a larger object"
)

// TestSamples creates every sample of the docs and config/samples on a
// real kube-apiserver with warmer's CRDs and shipped admission policies,
// as written: in the namespace the sample names (default when none), which
// has exactly the warmer.dev/ labels the sample's file gives it. What is
// not an API object is listed with the reason, never left out silently.
func TestSamples(t *testing.T) {
	root := docsRoot(t)
	samples := collectSamples(t, root)
	cp := testbed.StartControlPlane(t)
	cp.InstallIdentity(t)
	a := &applier{cp: cp, settled: map[string]bool{}}
	for _, s := range samples {
		t.Run(s.where, func(t *testing.T) { a.applyBlock(t, s) })
	}
	t.Logf("documents not applied (%d):\n%s", len(a.skipped), strings.Join(a.skipped, "\n"))
	if a.warmer == 0 {
		t.Errorf("no sample of a %s object found under %s: the walk is broken", warmv1.GroupVersion.Group, root)
	}
	t.Logf("%d blocks, %d objects of %s created", len(samples), a.warmer, warmv1.GroupVersion.Group)
}

// sample is a block with the namespace labels its file gives.
type sample struct {
	block
	labels map[string]map[string]string
}

// collectSamples finds the YAML blocks of every Markdown file and the
// files of config/samples.
func collectSamples(t *testing.T, root string) []sample {
	t.Helper()
	var out []sample
	for _, f := range markdownFiles(t, root) {
		text := readFile(t, root, f)
		blocks := yamlBlocks(f, text)
		labels := namespaceLabels(text, blocks)
		for _, b := range blocks {
			out = append(out, sample{b, labels})
		}
	}
	for _, f := range sampleFiles(t, root) {
		b := fileBlock(f, readFile(t, root, f))
		out = append(out, sample{b, namespaceLabels("", []block{b})})
	}
	return out
}

// applier creates the samples on one control plane.
type applier struct {
	cp *testbed.ControlPlane
	// settled are the namespaces whose labels the levers policy is known
	// to see as they are now.
	settled map[string]bool
	// skipped lists the documents not applied, with the reason.
	skipped []string
	// warmer counts the warmer objects created.
	warmer int
}

// applyBlock creates the block's objects in order, as kubectl create -f
// would, and deletes them again so that the next sample may reuse a name.
func (a *applier) applyBlock(t *testing.T, s sample) {
	var created []*unstructured.Unstructured
	for _, d := range s.docs {
		if obj := a.applyDoc(t, d, s.labels); obj != nil {
			created = append(created, obj)
		}
	}
	for _, obj := range slices.Backward(created) {
		a.remove(t, obj)
	}
}

// applyDoc creates one document and returns what it created.
func (a *applier) applyDoc(t *testing.T, d document, labels map[string]map[string]string) *unstructured.Unstructured {
	t.Helper()
	if d.err != nil {
		t.Errorf("%s: %v", d.where, d.err)
		return nil
	}
	obj, mapping, skip, err := a.resolve(d)
	if err != nil {
		t.Errorf("%s: %v", d.where, err)
		return nil
	}
	if skip != "" {
		a.skipped = append(a.skipped, d.where+": "+skip)
		return nil
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault) // as kubectl does
		}
		ns := obj.GetNamespace()
		a.ensureNamespace(t, ns, mergeLabels(labels[ns], d.needs))
	}
	if mapping.GroupVersionKind.GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
		a.applyNamespace(t, d, obj)
		return nil
	}
	return a.create(t, d, obj)
}

// resolve decodes the document into an object the API server serves, or
// says why it is not applied.
func (a *applier) resolve(d document) (*unstructured.Unstructured, *meta.RESTMapping, string, error) {
	if d.obj == nil {
		return nil, nil, notMapping, nil
	}
	apiVersion, _ := d.obj["apiVersion"].(string)
	kind, _ := d.obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, nil, fragment, nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, "", fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	mapping, err := a.cp.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if meta.IsNoMatchError(err) {
		if reason, ok := notAPIObjects[gv.Group]; ok {
			return nil, nil, kind + ", " + reason, nil
		}
		return nil, nil, "", fmt.Errorf("%s %s: the API server serves no such kind (%w)", apiVersion, kind, err)
	}
	if err != nil {
		return nil, nil, "", err
	}
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(d.obj)}
	return obj, mapping, "", nil
}

// create creates obj with strict field validation, so that a field the
// API does not know fails rather than being dropped, then writes the
// status the sample shows, if any.
func (a *applier) create(t *testing.T, d document, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	status, hasStatus := obj.Object["status"]
	err := a.cp.Client.Create(ctx, obj, client.FieldValidation("Strict"), client.FieldOwner(fieldOwner))
	if err == nil && hasStatus {
		obj.Object["status"] = status
		err = a.cp.Client.Status().Update(ctx, obj, &client.SubResourceUpdateOptions{
			UpdateOptions: client.UpdateOptions{FieldValidation: "Strict", FieldManager: fieldOwner}})
		if err != nil {
			err = fmt.Errorf("its status: %w", err)
		}
	}
	name := describe(obj)
	switch {
	case d.refused == "" && err != nil:
		t.Errorf("%s: %s: %v", d.where, name, err)
	case d.refused != "" && err == nil:
		t.Errorf("%s: %s: shown as refused (%q), but the API server took it", d.where, name, d.refused)
	case d.refused != "" && !strings.Contains(err.Error(), d.refused):
		t.Errorf("%s: %s: shown as refused with %q, but the API server says: %v", d.where, name, d.refused, err)
	}
	if err != nil && obj.GetUID() == "" {
		return nil
	}
	if obj.GetAPIVersion() == warmv1.GroupVersion.String() || strings.HasPrefix(obj.GetAPIVersion(), warmv1.GroupVersion.Group+"/") {
		a.warmer++
	}
	return obj
}

// remove deletes obj and waits until it is gone.
func (a *applier) remove(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if err := a.cp.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %s: %v", describe(obj), err)
	}
	testbed.Eventually(t, 30*time.Second, "deleting "+describe(obj), func() error {
		err := a.cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy())
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still there", describe(obj))
		}
		return err
	})
}

// describe names obj as kind namespace/name.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName() + "*"
	}
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetKind() + " " + name
}

// mergeLabels is a's labels with b's over them.
func mergeLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// namespaceKey is a Namespace's key.
func namespaceKey(name string) types.NamespacedName { return types.NamespacedName{Name: name} }

// newNamespace is a Namespace with labels.
func newNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}
