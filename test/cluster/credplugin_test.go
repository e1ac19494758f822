package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

// The images of TestCredentialPluginInPod: cloudApp is authorised by the
// plugin that reaches its token service; untrustedApp by one whose token
// service the node's CA bundle does not vouch for.
const (
	cloudApp     = cloudMirrored + "/private/app:v1"
	untrustedApp = cloudMirrored + "/untrusted/app:v1"
)

// TestCredentialPluginInPod installs warmer from its pushed image with
// config/components/credential-providers and credential-providers-azure,
// as an AKS user would, and runs inside the agent's Pod a plugin that
// works as ACR's does: it reads a client id and secret from
// /etc/kubernetes/azure.json, trades them over HTTPS for a registry token
// at a token service whose certificate only the node's CA bundle
// (mounted at /etc/ssl/certs) vouches for, and answers with it. The
// agent warms a private image with no pull secret. A second provider
// whose token service has a certificate the bundle does not vouch for
// fails, and its service is never asked: the plugin verified the
// certificate. The host paths the components mount are the kubelet's
// on a real node; here each is patched to a folder of the test (the
// bed's kubelet has no plugin and the host's CA bundle is not the test's
// to change): that is the only difference from the shipped components.
func TestCredentialPluginInPod(t *testing.T) {
	clientID, secret := "warmer-test-client", hostcheck.RandomPassword(t)
	trusted := testbed.StartTokenService(t, clientID, secret, authPassword)
	untrusted := testbed.StartTokenService(t, clientID, secret, authPassword)
	authReg.Push(t, "private/app:v1", testbed.AppImage(t))
	authReg.PushRandom(t, "untrusted/app:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	const cloudConfig = "/etc/kubernetes/azure.json" // where ACR's plugin reads it
	plugin := testbed.SetUpCredentialPlugin(t,
		testbed.PluginProvider{Name: "acr-like", MatchImages: []string{cloudMirrored + "/private"}, CacheDuration: "1h",
			Args: []string{"--key-type", "Registry", "--token-url", trusted.URL, "--cloud-config", cloudConfig}, Username: authReg.Username()},
		testbed.PluginProvider{Name: "untrusted", MatchImages: []string{cloudMirrored + "/untrusted"}, CacheDuration: "1h",
			Args: []string{"--token-url", untrusted.URL, "--cloud-config", cloudConfig}, Username: authReg.Username()},
	)
	host := hostFiles(t, trusted.CAPEM, clientID, secret)
	layer := credentialLayer(t, plugin, host)
	t.Cleanup(func() {
		_, _ = node.Kubectl(t, "delete", "imagewarm", "-n", "default", "cloud-app", "cloud-untrusted", "--ignore-not-found")
		_, _ = node.Kubectl(t, "delete", "-k", layer, "--ignore-not-found", "--timeout=3m")
		removeImage(t, cloudApp)
	})
	kubectl(t, "apply", "-k", layer)
	waitWorkloads(t)
	for name, ref := range map[string]string{"cloud-app": cloudApp, "cloud-untrusted": untrustedApp} {
		if err := node.Client.Create(context.Background(), build.ImageWarm("default", name, build.Images(ref))); err != nil {
			t.Fatal(err)
		}
	}

	waitImageWarmReady(t, "cloud-app")
	st, err := node.Containerd.ImageService(t).ImageStatus(context.Background(),
		&runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: cloudApp}})
	if err != nil || st.Image == nil {
		t.Errorf("%s not on the node after Ready: %v", cloudApp, err)
	}
	if trusted.Requests() == 0 {
		t.Error("the token service was never asked: the plugin did not run in the agent")
	}
	failed := waitImageReason(t, untrustedApp, warmv1.ReasonCredentialProviderFailed)
	if !strings.Contains(failed.Message, "untrusted") {
		t.Errorf("message %q does not name the provider", failed.Message)
	}
	if n := untrusted.Requests(); n != 0 {
		t.Errorf("the untrusted token service was asked %d times: the plugin did not verify its certificate", n)
	}
	checkNoSecret(t, secret, authPassword)

	kubectl(t, "delete", "imagewarm", "-n", "default", "cloud-app", "cloud-untrusted")
	kubectl(t, "delete", "-k", layer, "--timeout=3m")
	checkUninstalled(t, "-k", layer)
}

// credHostFiles are the test's stand-ins for the node's files the
// components mount.
type credHostFiles struct {
	certs, cloudConfig string
}

// hostFiles writes a CA bundle holding caPEM alone, where Go's TLS looks
// first (ca-certificates.crt), and an azure.json with the client's id and
// secret.
func hostFiles(t *testing.T, caPEM []byte, clientID, secret string) credHostFiles {
	t.Helper()
	dir := t.TempDir()
	h := credHostFiles{certs: filepath.Join(dir, "certs"), cloudConfig: filepath.Join(dir, "azure.json")}
	if err := os.Mkdir(h.certs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.certs, "ca-certificates.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]string{"aadClientId": clientID, "aadClientSecret": secret})
	if err := os.WriteFile(h.cloudConfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// credentialLayer is the install: `make deploy-overlay` of the pushed
// image, the bed's component, the two credential components, and one
// that points their host paths at the test's files.
func credentialLayer(t *testing.T, plugin *testbed.CredentialPlugin, h credHostFiles) string {
	t.Helper()
	deploy := filepath.Join(t.TempDir(), "deploy")
	runMake(t, "deploy-overlay", "IMG="+pushWarmerImage(t), "DEPLOY_DIR="+deploy)
	paths := filepath.Join(t.TempDir(), "paths")
	if err := os.Mkdir(paths, 0o755); err != nil {
		t.Fatal(err)
	}
	component := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: warmer-agent, namespace: warmer-system}
      spec:
        template:
          spec:
            volumes:
              - {name: credential-provider-config, hostPath: {path: %q}}
              - {name: credential-provider-bin, hostPath: {path: %q}}
              - {name: node-ca-certs, hostPath: {path: %q}}
              - {name: credential-provider-file-0, hostPath: {path: %q}}
`, plugin.Config, plugin.BinDir, h.certs, h.cloudConfig)
	if err := os.WriteFile(filepath.Join(paths, "kustomization.yaml"), []byte(component), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(testbed.RepoRoot(t), "config", "components")
	var head strings.Builder
	fmt.Fprintf(&head, "resources:\n  - %s\ncomponents:\n", relPath(t, dir, deploy))
	for _, c := range []string{testdata(t, "bed"), filepath.Join(config, "credential-providers"),
		filepath.Join(config, "credential-providers-azure"), paths} {
		fmt.Fprintf(&head, "  - %s\n", relPath(t, dir, c))
	}
	writeRunLayer(t, dir, head.String())
	return dir
}

// waitImageReason waits until the node's NodeWarm reports ref with reason.
func waitImageReason(t *testing.T, ref, reason string) warmv1.NodeImage {
	t.Helper()
	var got warmv1.NodeImage
	poll(t, 2*time.Minute, ref+" reported "+reason, func() error {
		var nw warmv1.NodeWarm
		if err := node.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &nw); err != nil {
			return err
		}
		for _, img := range nw.Status.Images {
			if img.Image == ref && img.Reason == reason {
				got = img
				return nil
			}
		}
		return fmt.Errorf("images %+v", nw.Status.Images)
	})
	return got
}

// checkNoSecret checks that no secret shows in the NodeWarm or in any
// event of the default namespace.
func checkNoSecret(t *testing.T, secrets ...string) {
	t.Helper()
	ctx := context.Background()
	var nw warmv1.NodeWarm
	if err := node.Client.Get(ctx, client.ObjectKey{Name: node.Name}, &nw); err != nil {
		t.Fatal(err)
	}
	var evs eventsv1.EventList
	if err := node.Client.List(ctx, &evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal([]any{nw, evs})
	for _, s := range secrets {
		if strings.Contains(string(raw), s) {
			t.Errorf("a secret shows in the NodeWarm or an event")
		}
	}
}
