package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// helmRelease is the release the Helm install makes.
const helmRelease = "warmer"

// TestHelmInstall installs warmer with `helm install` of charts/warmer, as
// the README says before any release: the image `make push` pushed to the
// test registry, set by the chart's image values, and a post-renderer
// adding what the bed's network needs, the same component
// (testdata/bed) the kubectl install takes. The agent and the controller
// become Ready, a sample ImageWarm too, and `helm uninstall` leaves
// nothing of the release in the cluster or on the node. Helm never deletes
// the namespace it installs into, so the test makes it before and deletes
// it after, as the user would.
func TestHelmInstall(t *testing.T) {
	repo := strings.TrimSuffix(pushWarmerImage(t), ":"+warmerTag)
	pushed := pushSamples(t)
	removeBedCRDs(t)
	layer := helmLayer(t)
	samples := filepath.Join(testbed.RepoRoot(t), "config", "samples")
	kubectl(t, "create", "namespace", installNamespace)
	t.Cleanup(func() {
		// After a failure, as after success: the bed is shared.
		_, _ = node.Kubectl(t, "delete", "-k", samples, "--ignore-not-found", "--timeout=2m")
		_, _ = node.Helm(t, "uninstall", helmRelease, "--namespace", installNamespace, "--ignore-not-found", "--wait", "--timeout=3m")
		_, _ = node.Kubectl(t, "delete", "namespace", installNamespace, "--ignore-not-found", "--timeout=3m")
	})

	helm(t, "install", helmRelease, filepath.Join(testbed.RepoRoot(t), "charts", "warmer"),
		"--namespace", installNamespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+warmerTag,
		"--post-renderer", "kustomize-bed", "--post-renderer-args", layer)
	waitWorkloads(t)
	kubectl(t, "apply", "-k", samples)
	for _, name := range []string{"base", "web"} {
		waitImageWarmReady(t, name)
	}
	checkPulled(t, pushed)

	// What the release holds, as Helm stored it (after the post-renderer),
	// to check after uninstalling.
	manifest := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(manifest, []byte(helm(t, "get", "manifest", helmRelease, "--namespace", installNamespace)), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "delete", "-k", samples, "--timeout=2m")
	helm(t, "uninstall", helmRelease, "--namespace", installNamespace, "--wait", "--timeout=3m")
	checkUninstalled(t, "-f", manifest)
	// Helm's own record of the release goes too (no --keep-history).
	if out := kubectl(t, "get", "secrets", "--namespace", installNamespace, "-l", "owner=helm", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("Helm's release records left after helm uninstall:\n%s", out)
	}
	kubectl(t, "delete", "namespace", installNamespace, "--timeout=3m")
}

// helmLayer writes, in a temporary folder, the kustomize layer that the
// post-renderer (testdata/helm-plugins) runs the chart's manifests through:
// testdata/bed and what only this run knows (see writeRunLayer). It points
// Helm at the plugin for the rest of the test and returns the folder.
func helmLayer(t *testing.T) string {
	t.Helper()
	t.Setenv("HELM_PLUGINS", testdata(t, "helm-plugins"))
	dir := t.TempDir()
	// The post-renderer writes helm.yaml.
	writeRunLayer(t, dir, "resources:\n  - helm.yaml\ncomponents:\n  - "+relPath(t, dir, testdata(t, "bed")))
	return dir
}

// removeBedCRDs deletes warmer's CRDs that the test bed's control plane
// installs at start, if a kubectl install has not already removed them:
// Helm refuses to take over objects another tool made, and a user's
// cluster would not have them.
func removeBedCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var crds []*unstructured.Unstructured
	for _, name := range []string{"imagewarms.warmer.dev", "nodewarms.warmer.dev", "rolloutbounds.warmer.dev"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		crd.SetName(name)
		if err := node.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting CRD %s: %v", name, err)
		}
		crds = append(crds, crd)
	}
	poll(t, 2*time.Minute, "the bed's CRDs gone", func() error {
		for _, crd := range crds {
			err := node.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())
			if err == nil {
				return fmt.Errorf("CRD %s still there", crd.GetName())
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// helm runs the cached helm CLI against the node's API server as the admin
// and fails the test on an error.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := node.Helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
