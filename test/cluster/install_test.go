package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// warmerRepo is the release image's repository, and warmerTag the tag
// the installs give the image under test.
const (
	warmerRepo = testbed.WarmerRepo
	warmerTag  = "v0.0.0-cluster"
)

// installNamespace is where config/default puts every namespaced object.
const installNamespace = "warmer-system"

// TestKustomizeInstall installs warmer as the README's Install section
// says, before any release: `make push IMG=...` to the test registry, the
// overlay `make deploy IMG=...` writes (config/default running that
// image), applied with `kubectl apply -k` through a layer that adds only
// what the bed's network needs (testdata/bed) and this run's ports; the
// node pulls the agent's image from the registry like any other;
// the agent and the controller become Ready, the samples' ImageWarms too
// (their images pulled from the test registry under their docker.io
// names). Its subtests then check the running install (installed_test.go),
// and `kubectl delete -k` must leave nothing of it in the cluster or on the
// node.
func TestKustomizeInstall(t *testing.T) {
	pushed := pushSamples(t)
	layer := deployLayer(t, pushWarmerImage(t))
	samples := filepath.Join(testbed.RepoRoot(t), "config", "samples")
	t.Cleanup(func() {
		// After a failure, as after success: the bed is shared.
		_, _ = node.Kubectl(t, "delete", "-k", samples, "--ignore-not-found", "--timeout=2m")
		_, _ = node.Kubectl(t, "delete", "-k", layer, "--ignore-not-found", "--timeout=3m")
	})

	kubectl(t, "apply", "-k", layer)
	waitWorkloads(t)
	checkAgentReadySoon(t)
	checkImageFsFromKubelet(t)
	kubectl(t, "apply", "-k", samples)
	for _, name := range []string{"base", "web"} {
		waitImageWarmReady(t, name)
	}
	checkPulled(t, pushed)

	// Each leaves the install running and its ImageWarms Ready; the last
	// one rolls it to another image.
	t.Run("AgentToken", testAgentToken)
	t.Run("ControllerMetrics", testControllerMetrics)
	t.Run("RootFilesystems", testRootFilesystems)
	t.Run("OneWarmedEvent", testOneWarmedEvent)
	t.Run("StartsServed", testStartsServed)
	t.Run("PinFromPod", testPinFromPod)
	t.Run("PrivateThroughBundle", testPrivateThroughBundle)
	t.Run("Reinstall", func(t *testing.T) { testReinstall(t, layer) })
	t.Run("NewImageTag", func(t *testing.T) { testNewImageTag(t, layer) })

	kubectl(t, "delete", "-k", samples, "--timeout=2m")
	kubectl(t, "delete", "-k", layer, "--timeout=3m")
	checkUninstalled(t, "-k", layer)
	err := node.Client.Get(context.Background(), client.ObjectKey{Name: installNamespace}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want NotFound", installNamespace, err)
	}
}

// pushSamples pushes the images of config/samples to the test registry,
// where the node finds them under their docker.io names, and labels the
// node for the web sample. At cleanup it removes them from the node again,
// so that the next install pulls them anew.
func pushSamples(t *testing.T) map[string]testbed.Image {
	t.Helper()
	pushed := map[string]testbed.Image{}
	for _, ref := range []string{"library/busybox:1.36", "library/nginx:1.27", "library/redis:7.4"} {
		pushed[ref] = reg.PushRandom(t, ref, testbed.ImageOptions{LayerSize: testbed.MB})
	}
	// The web sample selects the nodes of pool web.
	labelNode(t, "pool", "web")
	t.Cleanup(func() {
		for ref := range pushed {
			removeImage(t, "docker.io/"+ref)
		}
	})
	return pushed
}

// removeImage removes an image from the node's runtime, if there.
func removeImage(t *testing.T, ref string) {
	t.Helper()
	cri := node.Containerd.ImageService(t)
	_, err := cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Errorf("removing %s from the node: %v", ref, err)
	}
}

// importWarmerImage imports the release image as warmerRepo:tag into the
// node.
func importWarmerImage(t *testing.T, tag string) { testbed.ImportWarmerImage(t, node, tag) }

// pushedWarmer is the image pushWarmerImage pushed, once per run.
var pushedWarmer struct {
	sync.Mutex
	image string
}

// pushWarmerImage runs `make push` for this machine's platform, to the
// test registry as <registry>/warmer-dev/warmer:warmerTag, and returns
// that name: what a user pushes before installing.
func pushWarmerImage(t *testing.T) string {
	t.Helper()
	pushedWarmer.Lock()
	defer pushedWarmer.Unlock()
	if pushedWarmer.image != "" {
		return pushedWarmer.image
	}
	img := reg.Host + "/warmer-dev/warmer:" + warmerTag
	runMake(t, "push", "IMG="+img, "IMAGE_PLATFORMS=linux/"+goruntime.GOARCH, "IMAGE_TAR="+filepath.Join(t.TempDir(), "warmer-image.tar"))
	pushedWarmer.image = img
	return img
}

// deployLayer writes the overlay `make deploy IMG=image` applies, and, in
// another temporary folder, the bed's layer over it (testdata/bed and
// what only this run knows, see writeRunLayer); it returns the latter,
// for kubectl -k.
func deployLayer(t *testing.T, image string) string {
	t.Helper()
	deploy := filepath.Join(t.TempDir(), "deploy")
	runMake(t, "deploy-overlay", "IMG="+image, "DEPLOY_DIR="+deploy)
	dir := t.TempDir()
	writeRunLayer(t, dir, "resources:\n  - "+relPath(t, dir, deploy)+"\ncomponents:\n  - "+relPath(t, dir, testdata(t, "bed")))
	return dir
}

// runMake runs a target of the project's Makefile, as a user would.
func runMake(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", testbed.RepoRoot(t)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writeRunLayer writes in dir a kustomization of head and of what only
// this run's node knows (testbed.WriteRunLayer).
func writeRunLayer(t *testing.T, dir, head string) { testbed.WriteRunLayer(t, node, dir, head) }

// testdata is a folder of testdata.
func testdata(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(testbed.RepoRoot(t), "test", "cluster", "testdata", name)
}

// relPath is target relative to dir: kustomize takes other
// kustomizations only by relative path.
func relPath(t *testing.T, dir, target string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// kubectl runs kubectl as the admin and fails the test on an error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := node.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// labelNode sets a label on the node until the test ends.
func labelNode(t *testing.T, key, value string) {
	t.Helper()
	kubectl(t, "label", "node", node.Name, key+"="+value, "--overwrite")
	t.Cleanup(func() { _, _ = node.Kubectl(t, "label", "node", node.Name, key+"-") })
}

// waitWorkloads waits until the agent DaemonSet has a Ready pod on the
// node and the controller Deployment is available.
func waitWorkloads(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	poll(t, 3*time.Minute, "the agent DaemonSet Ready", func() error {
		var ds appsv1.DaemonSet
		if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "warmer-agent"}, &ds); err != nil {
			return err
		}
		if st := ds.Status; st.DesiredNumberScheduled != 1 || st.NumberReady != 1 || st.UpdatedNumberScheduled != 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	poll(t, 3*time.Minute, "the controller Deployment available", func() error {
		var d appsv1.Deployment
		if err := node.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "warmer-controller"}, &d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 || d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("status %+v", d.Status)
		}
		return nil
	})
}

// waitImageWarmReady waits for an ImageWarm of config/samples to be Ready.
func waitImageWarmReady(t *testing.T, name string) {
	t.Helper()
	poll(t, 3*time.Minute, "ImageWarm "+name+" Ready", func() error {
		var iw warmv1.ImageWarm
		if err := node.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &iw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(iw.Status.Conditions, warmv1.ConditionReady) {
			return fmt.Errorf("conditions %+v", iw.Status.Conditions)
		}
		return nil
	})
}

// checkPulled checks that the node's runtime holds each pushed image under
// its docker.io name, with the digest pushed to the test registry.
func checkPulled(t *testing.T, pushed map[string]testbed.Image) {
	t.Helper()
	cri := node.Containerd.ImageService(t)
	for ref, img := range pushed {
		name := "docker.io/" + ref
		st, err := cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: name}})
		if err != nil || st.Image == nil {
			t.Errorf("%s not on the node: %v", name, err)
			continue
		}
		want := strings.TrimSuffix(name, ref[strings.LastIndexByte(ref, ':'):]) + "@" + img.Digest
		if !slices.Contains(st.Image.RepoDigests, want) {
			t.Errorf("%s has digests %v, want %s", name, st.Image.RepoDigests, want)
		}
	}
}

// checkUninstalled checks that nothing of an install stays: no object
// `kubectl get` finds of source (-k and a layer, or -f and a manifest), no
// warmer pod anywhere, and no pod sandbox of it on the node.
func checkUninstalled(t *testing.T, source ...string) {
	t.Helper()
	args := append(append([]string{"get"}, source...), "--ignore-not-found", "-o", "name")
	if out := kubectl(t, args...); strings.TrimSpace(out) != "" {
		t.Errorf("left after uninstalling:\n%s", out)
	}
	ctx := context.Background()
	// Pods go after their workloads, by garbage collection.
	poll(t, 2*time.Minute, "no warmer pod", func() error {
		var pods corev1.PodList
		if err := node.Client.List(ctx, &pods, client.MatchingLabels{"app.kubernetes.io/name": "warmer"}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d warmer pods left", len(pods.Items))
		}
		return nil
	})
	// The kubelet removes the pods' sandboxes once they are gone.
	rt := node.Containerd.RuntimeService(t)
	poll(t, 2*time.Minute, "no warmer pod sandbox on the node", func() error {
		list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.namespace": installNamespace},
		}})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d sandboxes of %s", len(list.Items), installNamespace)
		}
		return nil
	})
}

// poll is testbed.Poll with the test's usual interval.
func poll(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testbed.Poll(t, 200*time.Millisecond, timeout, what, check)
}
