// Package privateimages shows, on a real node, what the kubelet's image pull
// credential verification (KEP-2535, Kubernetes 1.35+) does with a private
// image that warmer pulled with one namespace's pull secret: under the
// default policy a pod of another namespace, without the secret, runs it;
// under AlwaysVerify that pod is refused, while a pod with the secret starts
// after the kubelet asked the registry for the manifest only; under
// NeverVerifyAllowlistedImages only the listed image goes unchecked.
// docs/security.md explains each policy; these tests are its evidence.
package privateimages

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/faults"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

const (
	// mirrored is the registry name pods and the ImageWarm use; the node
	// serves it from the test registry through a recording proxy.
	mirrored = "ghcr.io"
	// image is the private image, named as a pod names it.
	image = mirrored + "/team-a/app:v1"
	// listed is an image on the allowlist of NeverVerifyAllowlistedImages.
	// The registry asks credentials for it too: the list opens whatever it
	// names.
	listed = mirrored + "/public/base:v1"
	// policyKey is the kubelet's configuration field under test.
	policyKey = "imagePullCredentialsVerificationPolicy"
	// owner is the namespace whose secret may pull the image; other is a
	// tenant without it.
	owner, other = "team-a", "team-b"
	// secretName is the owner's pull secret.
	secretName = "regcred"
)

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestWarmedPrivateImage warms a private image with an ImageWarm and its
// namespace's pull secret, on one node per verification policy (each policy
// is a kubelet configuration, so each subtest starts its own node).
func TestWarmedPrivateImage(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "private", Username: "team-a", Password: hostcheck.RandomPassword(t)})
	reg.Push(t, "team-a/app:v1", testbed.AppImage(t))
	reg.Push(t, "public/base:v1", testbed.AppImage(t))

	// The kubelet's configuration leaves the policy unset: its default
	// must be NeverVerifyPreloadedImages.
	t.Run("DefaultPolicy", func(t *testing.T) {
		b := warmOnNode(t, reg, nil, "NeverVerifyPreloadedImages", image)
		testDefaultExposes(t, b)
	})
	t.Run("AlwaysVerify", func(t *testing.T) {
		b := warmOnNode(t, reg, map[string]any{policyKey: "AlwaysVerify"}, "AlwaysVerify", image)
		testAlwaysVerify(t, b)
	})
	t.Run("NeverVerifyAllowlistedImages", func(t *testing.T) {
		config := map[string]any{
			policyKey:                              "NeverVerifyAllowlistedImages",
			"preloadedImagesVerificationAllowlist": []string{mirrored + "/public/*"},
		}
		b := warmOnNode(t, reg, config, "NeverVerifyAllowlistedImages", image, listed)
		testAllowlist(t, b)
	})
}

// testDefaultExposes: under the default policy the kubelet counts an image
// that it did not pull itself as preloaded, so a pod of another namespace,
// with no pull secret at all, runs the private image, and the registry is
// not even asked. The event's wording ("... and can be accessed by the
// pod") is the kubelet's when its KubeletEnsureSecretPulledImages gate is on,
// which it is by default.
func testDefaultExposes(t *testing.T, b *bed) {
	mark := len(b.proxy.Requests())
	pod := b.runPod(t, other, "intruder", image, false, "")
	waitRunning(t, b, pod)
	b.wantEvent(t, pod, "Pulled", "already present on machine and can be accessed by the pod")
	if reqs := b.proxy.Requests()[mark:]; len(reqs) > 0 {
		t.Errorf("the registry was asked %d times for a pod the kubelet let through unverified: %v", len(reqs), paths(reqs))
	}
}

// testAlwaysVerify: every pod must show credentials for an image the kubelet
// has no record of pulling with them. A pod without the secret is refused
// (its pull, without credentials, gets 401); the owner's pod starts after a
// pull that fetches no layer; a second pod with the same secret starts from
// the kubelet's record without asking the registry; a pod without the
// secret and with pull policy Never is still refused.
func testAlwaysVerify(t *testing.T, b *bed) {
	mark := len(b.proxy.Requests())
	intruder := b.runPod(t, other, "intruder", image, false, "")
	waitPullRefused(t, b, intruder)
	// containerd 2.4's words for a 401 without credentials.
	b.wantEvent(t, intruder, "Failed", "pull access denied")
	reqs := b.proxy.Requests()[mark:]
	t.Logf("registry requests for the refused pod: %v", paths(reqs))
	if manifestRequests(reqs) == 0 || blobRequests(reqs) > 0 {
		t.Errorf("refused pod: want manifest requests and no blob request, the registry saw %v", paths(reqs))
	}
	// Its retries would mix with the requests counted below.
	b.deletePod(t, intruder)

	mark = len(b.proxy.Requests())
	pod := b.runPod(t, owner, "with-secret", image, true, "")
	waitRunning(t, b, pod)
	b.wantEvent(t, pod, "Pulled", "Successfully pulled image")
	reqs = b.proxy.Requests()[mark:]
	t.Logf("registry requests for the pod with the secret: %v", paths(reqs))
	if manifestRequests(reqs) == 0 {
		t.Errorf("the kubelet started the pod with the secret without asking the registry: %v", paths(reqs))
	}
	if n := blobRequests(reqs); n > 0 {
		t.Errorf("the kubelet downloaded %d blobs of a warmed image: %v", n, paths(reqs))
	}

	mark = len(b.proxy.Requests())
	again := b.runPod(t, owner, "with-secret-again", image, true, "")
	waitRunning(t, b, again)
	b.wantEvent(t, again, "Pulled", "already present on machine and can be accessed by the pod")
	if reqs := b.proxy.Requests()[mark:]; len(reqs) > 0 {
		t.Errorf("a second pod with a verified secret made the kubelet ask the registry: %v", paths(reqs))
	}

	// The owner's pull opened the image to the owner's secret only. A new
	// pod without it, which may not pull (Never), is told the image is
	// not there, as if it were absent, and nothing asks the registry.
	mark = len(b.proxy.Requests())
	never := b.runPod(t, other, "intruder-never", image, false, corev1.PullNever)
	waitPullRefused(t, b, never)
	if got := waitingReason(b.get(t, never)); got != "ErrImageNeverPull" {
		t.Errorf("pod with pull policy Never and no secret: waiting %q, want ErrImageNeverPull", got)
	}
	b.wantEvent(t, never, "ErrImageNeverPull", "is not present with pull policy of Never")
	if reqs := b.proxy.Requests()[mark:]; len(reqs) > 0 {
		t.Errorf("a pod with pull policy Never made the kubelet ask the registry: %v", paths(reqs))
	}
}

// testAllowlist: an image on the allowlist runs in any pod without a check,
// warmed with a secret or not; every other warmed image is checked as under
// AlwaysVerify, so the private one is refused to a pod without its secret.
func testAllowlist(t *testing.T, b *bed) {
	mark := len(b.proxy.Requests())
	pod := b.runPod(t, other, "listed", listed, false, "")
	waitRunning(t, b, pod)
	b.wantEvent(t, pod, "Pulled", "already present on machine and can be accessed by the pod")
	if reqs := b.proxy.Requests()[mark:]; len(reqs) > 0 {
		t.Errorf("the registry was asked for an allowlisted image: %v", paths(reqs))
	}

	intruder := b.runPod(t, other, "intruder", image, false, "")
	waitPullRefused(t, b, intruder)
	b.wantEvent(t, intruder, "Failed", "pull access denied")
}

// bed is one node with a policy, its registry proxy and a warmed image.
type bed struct {
	node  *testbed.RealNode
	proxy *faults.FaultProxy
}

// warmOnNode starts a node whose kubelet has config over the test bed's,
// checks that the kubelet runs with the policy want, and has warmer's agent
// warm images there for the owner's ImageWarm with its secret. The registry
// must see layers go to the agent's pulls; the agent is then stopped, so
// that every later registry request is the kubelet's.
func warmOnNode(t *testing.T, reg *testbed.Registry, config map[string]any, want string, images ...string) *bed {
	t.Helper()
	// The proxy passes everything through; it is here for its request log.
	proxy := faults.StartFaultProxy(t, reg.Host)
	n := testbed.StartNode(t, testbed.NodeOptions{Mirrors: map[string]string{mirrored: proxy.Host}, KubeletConfig: config})
	b := &bed{node: n, proxy: proxy}
	b.wantPolicy(t, want)
	for _, ns := range []string{owner, other} {
		b.namespace(t, ns)
	}
	n.LendPullSecrets(t, owner)
	b.create(t, build.DockerConfigSecret(owner, secretName, mirrored, reg.Username(), reg.Password()))
	iw := build.ImageWarm(owner, "app", build.Images(images...))
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: secretName}}
	b.create(t, iw)

	// The controller seals the owner's secret into the node's credential
	// bundle in warmer's namespace, to the key the agent publishes; the
	// agent opens it there.
	copier := testbed.StartProcess(t, "controller", testbed.BuildWarmer(t), "controller",
		"--kubeconfig", n.ControllerKubeconfig(t), "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	defer copier.Stop()
	agent := testbed.StartProcess(t, "agent", append([]string{testbed.BuildWarmer(t), "agent",
		"--kubeconfig", n.AgentKubeconfig(t, n.Name), "--node-name", n.Name,
		"--container-runtime-endpoint", n.Containerd.Endpoint,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, testbed.DefaultAgentFlags...)...)
	cri := n.Containerd.ImageService(t)
	testbed.Eventually(t, 2*time.Minute, "warmer's agent pulling "+strings.Join(images, ", "), func() error {
		if agent.Exited() {
			t.Fatalf("the agent exited:\n%s", agent.Log(30))
		}
		for _, img := range images {
			resp, err := cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img}})
			if err != nil {
				return err
			}
			if resp.Image == nil {
				return fmt.Errorf("%s not on the node yet; agent:\n%s", img, agent.Log(5))
			}
		}
		return nil
	})
	agent.Stop()
	if log, err := os.ReadFile(agent.LogPath()); err != nil || strings.Contains(string(log), reg.Password()) {
		t.Errorf("the agent's log has the registry password in it (or cannot be read: %v)", err)
	}
	reqs := proxy.Requests()
	t.Logf("registry requests for the warm: %v", paths(reqs))
	if blobRequests(reqs) == 0 {
		t.Fatalf("the warm downloaded no blob, so the image was on the node already: %v", paths(reqs))
	}
	return b
}
