// Package credprovider checks, on real containerd, a real basic-auth
// registry and the built agent, that the agent pulls private images with
// the kubelet's credential-provider plugins and no pull secret, honours
// the plugins' cache, and reports a failing plugin by a classified reason.
package credprovider

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

const (
	ns   = "creds"
	node = "node-cred"
)

func TestCredentialProviders(t *testing.T) {
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "cred", Username: "robot", Password: "s3cret-plugin-" + fmt.Sprint(time.Now().UnixNano())})
	small := testbed.ImageOptions{LayerSize: 64 << 10}
	a := reg.PushRandom(t, "private/a:v1", small).Ref
	b := reg.PushRandom(t, "private/b:v1", small).Ref
	broken := reg.PushRandom(t, "broken/c:v1", small).Ref
	plugin := testbed.SetUpCredentialPlugin(t,
		// Registry-wide answers for an hour: one run serves every image.
		testbed.PluginProvider{Name: "registry-fake", MatchImages: []string{reg.Host + "/private"}, CacheDuration: "1h",
			Args: []string{"--key-type", "Registry"}, Username: reg.Username(), Password: reg.Password()},
		testbed.PluginProvider{Name: "broken-fake", MatchImages: []string{reg.Host + "/broken"}, CacheDuration: "1h",
			Args: []string{"--mode", "exit"}, Username: reg.Username(), Password: reg.Password()},
	)
	settings := testbed.DefaultAgent.With(plugin.Flags()...)
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{Agent: &settings})
	n := f.Nodes[node]
	f.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	t.Run("private images pull through the plugin, no pull secret", func(t *testing.T) {
		f.Create(t, build.ImageWarm(ns, "private", build.Images(a, b)))
		if out, err := f.CP.Kubectl(t, "wait", "--for=condition=Ready", "imagewarm/private", "-n", ns, "--timeout=120s"); err != nil {
			t.Fatalf("kubectl wait: %v\n%s", err, out)
		}
		if err := n.AllPresent(t, a, b); err != nil {
			t.Fatal(err)
		}
		// A Registry answer cached for an hour serves both images: one run.
		if runs := plugin.Runs(t); !slices.Equal(runs, []string{reg.Host + "/private/a"}) && !slices.Equal(runs, []string{reg.Host + "/private/b"}) {
			t.Fatalf("plugin runs = %q; want exactly one, for one of the two images", runs)
		}
	})

	t.Run("an evicted image is pulled again from the cache", func(t *testing.T) {
		n.Remove(t, a)
		testbed.Eventually(t, 60*time.Second, "a back", func() error { return n.AllPresent(t, a) })
		if runs := plugin.Runs(t); len(runs) != 1 {
			t.Fatalf("plugin runs = %q; want still one: the answer is cached for an hour", runs)
		}
		if hits := n.Metric(t, "warmer_credential_provider_cache_hits_total", `provider="registry-fake"`); hits < 2 {
			t.Fatalf("cache hits = %v; want at least 2 (the second image and the re-pull)", hits)
		}
	})

	t.Run("NodeWarm names the providers", func(t *testing.T) {
		var nw warmv1.NodeWarm
		testbed.Eventually(t, 30*time.Second, "credentialProviders in the NodeWarm", func() error {
			if err := f.CP.Client.Get(t.Context(), types.NamespacedName{Name: node}, &nw); err != nil {
				return err
			}
			if !slices.Equal(nw.Status.CredentialProviders, []string{"registry-fake", "broken-fake"}) {
				return fmt.Errorf("credentialProviders = %v", nw.Status.CredentialProviders)
			}
			return nil
		})
	})

	t.Run("a failing plugin: classified reason, no crash, no secret", func(t *testing.T) {
		testFailingPlugin(t, f, reg, broken)
	})
}

// testFailingPlugin: an image whose plugin exits non-zero fails with
// CredentialProviderFailed naming the provider and the kind, the agent
// runs on, and the password the plugin printed on stderr is nowhere.
func testFailingPlugin(t *testing.T, f *testbed.Fleet, reg *testbed.Registry, broken string) {
	n := f.Nodes[node]
	f.Create(t, build.ImageWarm(ns, "broken", build.Images(broken)))
	var img warmv1.NodeImage
	testbed.Eventually(t, 60*time.Second, "CredentialProviderFailed", func() error {
		var err error
		if img, err = f.NodeImage(node, broken); err != nil {
			return err
		}
		if img.Reason != "CredentialProviderFailed" {
			return fmt.Errorf("state %s reason %q", img.State, img.Reason)
		}
		return nil
	})
	// The NodeWarm keeps plain text: the provider's quotes become apostrophes.
	for _, want := range []string{"'broken-fake'", "PluginFailed", "exit status 2"} {
		if !strings.Contains(img.Message, want) {
			t.Errorf("message %q lacks %q", img.Message, want)
		}
	}
	testbed.Eventually(t, 30*time.Second, "ImageWarm failure reason", func() error {
		st := f.ImageWarm(t, ns, "broken").Status
		for _, fl := range st.Failures {
			if fl.Reason == "CredentialProviderFailed" {
				return nil
			}
		}
		return fmt.Errorf("failures %+v", st.Failures)
	})
	if n.Agent.Exited() {
		t.Fatalf("the agent exited:\n%s", n.Agent.Log(30))
	}
	if got := n.Metric(t, "warmer_credential_provider_runs_total", `provider="broken-fake"`, `result="PluginFailed"`); got < 1 {
		t.Errorf("runs{broken-fake,PluginFailed} = %v; want at least 1", got)
	}
	// The plugin printed the password on stderr before failing.
	log := n.Agent.Log(10000)
	if !strings.Contains(log, "broken-fake") {
		t.Fatal("the agent's log never names the failing provider: the search below would prove little")
	}
	nwJSON, err := f.CP.Kubectl(t, "get", "nodewarm", node, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	iwJSON, err := f.CP.Kubectl(t, "get", "imagewarms", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"agent log": log, "NodeWarm": nwJSON, "ImageWarms": iwJSON} {
		if strings.Contains(text, reg.Password()) {
			t.Errorf("%s holds the plugin's password", what)
		}
	}
}
