package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/faults"
)

// earlierVersion is the version stamped into earlierCommit's image.
const earlierVersion = "v0.0.1-earlier"

// releaseArtifacts is what make release wrote and make publish pushed.
type releaseArtifacts struct {
	version string
	dist    string
	// image is REGISTRY/warmer@sha256:..., what install.yaml and the chart run.
	image string
}

// TestReleaseInstall makes this tree's release (make release) with the
// test registry as REGISTRY, publishes it there (make publish), makes and
// publishes an earlier commit's artifacts likewise (earlierRelease), and
// installs from nothing but those artifacts, through the bed's network
// layer (testdata/bed) as the other installs: install.yaml of the earlier
// commit with kubectl, the README's first ImageWarm (its image on a
// proxy of the test registry that counts requests) Ready, an upgrade to
// this release's install.yaml keeping the ImageWarm and fetching no image
// again, kubectl delete leaving no object of any cluster-scoped kind;
// then this release's chart from oci:// with helm install, the ImageWarm
// Ready again, helm uninstall leaving nothing either.
func TestReleaseInstall(t *testing.T) {
	// helm push and helm pull keep their registry settings and cache here.
	for _, env := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(env, t.TempDir())
	}
	registry := reg.Host + "/warmer-dev"
	earlier := earlierRelease(t, registry)
	current := makeRelease(t, treeRelease(t), registry)
	proxy := faults.StartFaultProxy(t, reg.Host)
	warm := firstImageWarm(t, proxy.Host)

	t.Run("Kubectl", func(t *testing.T) { testReleaseKubectl(t, earlier, current, warm, proxy) })
	t.Run("Helm", func(t *testing.T) { testReleaseHelm(t, registry, current, warm) })
}

// testReleaseKubectl installs earlier's install.yaml, the ImageWarm,
// upgrades to current's and uninstalls.
func testReleaseKubectl(t *testing.T, earlier, current releaseArtifacts, warm *warmv1.ImageWarm, proxy *faults.FaultProxy) {
	before, after := installLayer(t, earlier), installLayer(t, current)
	t.Cleanup(func() {
		_, _ = node.Kubectl(t, "delete", "-k", after, "--ignore-not-found", "--timeout=3m")
	})
	kubectl(t, "apply", "-k", before)
	waitRolledOut(t, earlier.image)
	created := createImageWarm(t, warm)
	waitImageWarmReady(t, warm.Name)
	seen := len(proxy.Requests())
	// The count below means something only if the first pull went through
	// the proxy.
	if gets := countGets(proxy.Requests()); gets == 0 {
		t.Fatalf("the ImageWarm is Ready with no GET through the proxy: is its image %s pulled from elsewhere?", warm.Spec.Images[0])
	}

	kubectl(t, "apply", "-k", after)
	waitRolledOut(t, current.image)
	// The new agent looks at the node's images when it starts: give it a
	// few resync-free seconds, long enough for any pull to begin.
	time.Sleep(10 * time.Second)
	waitImageWarmReady(t, warm.Name)
	var kept warmv1.ImageWarm
	if err := node.Client.Get(context.Background(), client.ObjectKeyFromObject(warm), &kept); err != nil {
		t.Fatal(err)
	}
	if kept.UID != created.UID {
		t.Errorf("ImageWarm %s was replaced by the upgrade: uid %s, was %s", warm.Name, kept.UID, created.UID)
	}
	if again := proxy.Requests()[seen:]; countGets(again) > 0 {
		t.Errorf("after the upgrade the image was fetched again: %+v", again)
	}

	kubectl(t, "delete", "-f", filepath.Join(after, "install.yaml"), "--timeout=3m")
	checkUninstalled(t, "-k", after)
	checkClusterScopedGone(t, current)
}

// countGets counts the GET requests among rs: fetches of a manifest or a
// blob (a HEAD only asks whether one exists).
func countGets(rs []faults.ProxyRequest) int {
	n := 0
	for _, r := range rs {
		if r.Method == "GET" {
			n++
		}
	}
	return n
}

// testReleaseHelm installs current's chart from the registry, the
// ImageWarm, and uninstalls.
func testReleaseHelm(t *testing.T, registry string, current releaseArtifacts, warm *warmv1.ImageWarm) {
	removeBedCRDs(t)
	layer := helmLayer(t)
	kubectl(t, "create", "namespace", installNamespace)
	t.Cleanup(func() {
		_, _ = node.Helm(t, "uninstall", helmRelease, "--namespace", installNamespace, "--ignore-not-found", "--wait", "--timeout=3m")
		_, _ = node.Kubectl(t, "delete", "namespace", installNamespace, "--ignore-not-found", "--timeout=3m")
	})
	helm(t, "install", helmRelease, "oci://"+registry+"/charts/warmer", "--version", strings.TrimPrefix(current.version, "v"),
		"--plain-http", "--namespace", installNamespace,
		"--post-renderer", "kustomize-bed", "--post-renderer-args", layer)
	waitRolledOut(t, current.image)
	createImageWarm(t, warm)
	waitImageWarmReady(t, warm.Name)

	manifest := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(manifest, []byte(helm(t, "get", "manifest", helmRelease, "--namespace", installNamespace)), 0o600); err != nil {
		t.Fatal(err)
	}
	helm(t, "uninstall", helmRelease, "--namespace", installNamespace, "--wait", "--timeout=3m")
	checkUninstalled(t, "-f", manifest)
	kubectl(t, "delete", "namespace", installNamespace, "--timeout=3m")
	checkClusterScopedGone(t, current)
}

// makeRelease runs make release for this machine's platform and make
// publish, to registry.
func makeRelease(t *testing.T, version, registry string) releaseArtifacts {
	t.Helper()
	dist := filepath.Join(t.TempDir(), "dist")
	args := []string{"VERSION=" + version, "REGISTRY=" + registry, "DIST=" + dist, "IMAGE_PLATFORMS=linux/" + goruntime.GOARCH, "PLUGIN_PLATFORMS=linux/" + goruntime.GOARCH}
	runMake(t, append([]string{"release"}, args...)...)
	runMake(t, append([]string{"publish"}, args...)...)
	install, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ +image: (`+regexp.QuoteMeta(registry)+`/warmer@sha256:[0-9a-f]{64})$`).FindAllSubmatch(install, -1)
	if len(m) != 2 || string(m[0][1]) != string(m[1][1]) {
		t.Fatalf("install.yaml of %s runs %q, want one image by digest in both workloads", version, m)
	}
	return releaseArtifacts{version: version, dist: dist, image: string(m[0][1])}
}

// treeRelease is the release config/default names (make set-release).
func treeRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^    newTag: (v\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("config/default names no release (newTag)")
	}
	return string(m[1])
}

// installLayer writes the bed's layer over a copy of the release's
// install.yaml (kustomize takes files inside its folder only) and returns
// its folder.
func installLayer(t *testing.T, rel releaseArtifacts) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rel.dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "install.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	writeRunLayer(t, dir, "resources:\n  - install.yaml\ncomponents:\n  - "+relPath(t, dir, testdata(t, "bed")))
	return dir
}

// firstImageWarm is config/samples/first-imagewarm.yaml with its image
// moved to host, where the test registry serves a random image under the
// same path; the node removes the image at cleanup.
func firstImageWarm(t *testing.T, host string) *warmv1.ImageWarm {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "samples", "first-imagewarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var iw warmv1.ImageWarm
	if err := yaml.UnmarshalStrict(b, &iw); err != nil {
		t.Fatal(err)
	}
	if len(iw.Spec.Images) != 1 {
		t.Fatalf("first-imagewarm.yaml has %d images, want 1", len(iw.Spec.Images))
	}
	path := "release/" + string(iw.Spec.Images[0])
	reg.PushRandom(t, path, testbed.ImageOptions{LayerSize: testbed.MB})
	iw.Spec.Images[0] = warmv1.ImageReference(host + "/" + path)
	t.Cleanup(func() { removeImage(t, string(iw.Spec.Images[0])) })
	return &iw
}

// createImageWarm creates a copy of iw and returns it as created.
func createImageWarm(t *testing.T, iw *warmv1.ImageWarm) *warmv1.ImageWarm {
	t.Helper()
	c := iw.DeepCopy()
	if err := node.Client.Create(context.Background(), c); err != nil {
		t.Fatalf("creating ImageWarm %s: %v", iw.Name, err)
	}
	return c
}

// waitRolledOut waits until the agent and the controller run image, each
// with one Ready pod of the workload's current generation.
func waitRolledOut(t *testing.T, image string) {
	t.Helper()
	ctx := context.Background()
	poll(t, 4*time.Minute, "the workloads rolled out to "+image, func() error {
		var ds appsv1.DaemonSet
		if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "warmer-agent"}, &ds); err != nil {
			return err
		}
		st := ds.Status
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("agent DaemonSet runs %s", got)
		}
		if st.ObservedGeneration != ds.Generation || st.UpdatedNumberScheduled != 1 || st.NumberReady != 1 || st.NumberAvailable != 1 {
			return fmt.Errorf("agent DaemonSet status %+v", st)
		}
		var d appsv1.Deployment
		if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "warmer-controller"}, &d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("controller Deployment runs %s", got)
		}
		if s := d.Status; s.ObservedGeneration != d.Generation || s.UpdatedReplicas != 1 || s.ReadyReplicas != 1 || s.Replicas != 1 {
			return fmt.Errorf("controller Deployment status %+v", s)
		}
		var pods corev1.PodList
		if err := node.Client.List(ctx, &pods, client.InNamespace(installNamespace), client.MatchingLabels{"app.kubernetes.io/name": "warmer"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != image {
				return fmt.Errorf("pod %s of the earlier image still there", p.Name)
			}
		}
		return nil
	})
}

// clusterScoped is every cluster-scoped object an install makes, by kind
// and name: what uninstalling must remove. checkClusterScopedGone also
// checks that install.yaml makes no other.
var clusterScoped = []struct {
	gvk   schema.GroupVersionKind
	names []string
}{
	{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		[]string{"imagewarms.warmer.dev", "nodewarms.warmer.dev", "rolloutbounds.warmer.dev"}},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		[]string{"warmer-agent", "warmer-agent-kubelet-stats", "warmer-agent-startup-taint", "warmer-controller", "warmer-controller-images-from", "warmer-controller-metrics-auth", "warmer-controller-pull-secrets", "warmer-metrics-reader", "warmer-viewer"}},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		[]string{"warmer-agent", "warmer-agent-kubelet-stats", "warmer-agent-startup-taint", "warmer-controller", "warmer-controller-images-from", "warmer-controller-metrics-auth"}},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
		[]string{"warmer-agent-own-node-status", "warmer-agent-own-node-taint", "warmer-agent-own-nodewarm", "warmer-imagewarm-cluster-levers", "warmer-imagewarm-registries"}},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
		[]string{"warmer-agent-own-node-status", "warmer-agent-own-node-taint", "warmer-agent-own-nodewarm", "warmer-imagewarm-cluster-levers", "warmer-imagewarm-registries"}},
	{schema.GroupVersionKind{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Kind: "FlowSchema"}, []string{"warmer-agents"}},
	{schema.GroupVersionKind{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Kind: "PriorityLevelConfiguration"}, []string{"warmer-agents"}},
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, []string{installNamespace}},
}

// checkClusterScopedGone checks that no object of clusterScoped is left,
// each asked for by kind and name (the namespace may take a while to
// finish), and that the list names every cluster-scoped object of the
// release's install.yaml.
func checkClusterScopedGone(t *testing.T, rel releaseArtifacts) {
	t.Helper()
	ctx := context.Background()
	want := map[string]bool{}
	for _, k := range clusterScoped {
		for _, name := range k.names {
			want[k.gvk.Kind+"/"+name] = true
		}
	}
	for _, obj := range installObjects(t, rel) {
		// By the API server's word: kubectl kustomize writes a namespace
		// on the kinds its built-in schema does not know.
		namespaced, err := node.Client.IsObjectNamespaced(obj)
		if err != nil {
			t.Fatal(err)
		}
		if key := obj.GetKind() + "/" + obj.GetName(); !namespaced && !want[key] {
			t.Errorf("install.yaml makes %s, which the uninstall check does not look for", key)
		}
	}
	poll(t, 3*time.Minute, "every cluster-scoped object gone", func() error {
		for _, k := range clusterScoped {
			for _, name := range k.names {
				obj := &unstructured.Unstructured{}
				obj.SetGroupVersionKind(k.gvk)
				err := node.Client.Get(ctx, client.ObjectKey{Name: name}, obj)
				if err == nil {
					return fmt.Errorf("%s %s still there", k.gvk.Kind, name)
				}
				if !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		return nil
	})
}

// installObjects are the objects of the release's install.yaml.
func installObjects(t *testing.T, rel releaseArtifacts) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rel.dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}
