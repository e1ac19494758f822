// Package node checks the agent's credential providers on a real node
// whose kubelet runs with the same CredentialProviderConfig and plugin
// directory: an ImageWarm with no pull secret warms a private image
// through the plugin, a Pod without imagePullSecrets then starts from it
// without a pull, the kubelet itself pulls through the same plugin, a
// failing plugin costs only its own image, and no credential shows
// anywhere warmer writes or serves.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
	"github.com/warmer-dev/warmer/test/testbed/build"
	"github.com/warmer-dev/warmer/test/testbed/hostcheck"
)

const (
	ns = "default"
	// mirrored is the registry name pods, ImageWarms and the plugins'
	// matchImages use; the node serves it from the basic-auth registry.
	mirrored = "ghcr.io"
	// app is warmed by the agent; direct is pulled by the kubelet alone;
	// broken is matched by the failing plugin only.
	app    = mirrored + "/private/app:v1"
	direct = mirrored + "/private/direct:v1"
	broken = mirrored + "/broken/c:v1"
	// good and failing are the providers' names.
	good, failing = "node-registry", "node-broken"
)

func TestMain(m *testing.M) {
	// The tests' clients log nothing they need; unset, controller-runtime
	// prints a warning with a stack trace when the first one is made.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestKubeletSharedProviders starts one node whose kubelet has the
// plugins' flags, and warmer beside it with the same two flags.
func TestKubeletSharedProviders(t *testing.T) {
	pass, brokenPass := hostcheck.RandomPassword(t), hostcheck.RandomPassword(t)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "crednode", Username: "robot", Password: pass})
	reg.Push(t, "private/app:v1", testbed.AppImage(t))
	reg.Push(t, "private/direct:v1", testbed.AppImage(t))
	reg.PushRandom(t, "broken/c:v1", testbed.ImageOptions{LayerSize: 64 << 10})
	plugin := testbed.SetUpCredentialPlugin(t,
		testbed.PluginProvider{Name: good, MatchImages: []string{mirrored + "/private"}, CacheDuration: "1h",
			Args: []string{"--key-type", "Registry"}, Username: reg.Username(), Password: pass},
		// Fails holding a password of its own, which it prints on stderr.
		testbed.PluginProvider{Name: failing, MatchImages: []string{mirrored + "/broken"}, CacheDuration: "1h",
			Args: []string{"--mode", "exit"}, Username: reg.Username(), Password: brokenPass},
	)
	// The kubelet refuses to start on a configuration it cannot load, so
	// a Ready node means it took the file and found both plugins.
	n := testbed.StartNode(t, testbed.NodeOptions{Mirrors: map[string]string{mirrored: reg.Host}, KubeletFlags: plugin.Flags()})
	f := testbed.StartFleetBeside(t, n, testbed.DefaultAgent.With(plugin.Flags()...))
	f.Create(t, build.ImageWarm(ns, "app", build.Images(app)))
	f.Create(t, build.ImageWarm(ns, "broken", build.Images(broken)))

	t.Run("WarmThroughPlugin", func(t *testing.T) { testWarm(t, f, plugin) })
	t.Run("PodStartsWithoutPull", func(t *testing.T) { testPodUsesWarm(t, n) })
	t.Run("KubeletUsesSamePlugin", func(t *testing.T) { testKubeletPulls(t, n, plugin) })
	t.Run("FailingPlugin", func(t *testing.T) { testFailing(t, f) })
	t.Run("NoCredentialShown", func(t *testing.T) {
		testNoLeak(t, f, n, append(hostcheck.LeakForms("the registry's password", reg.Username(), pass),
			hostcheck.LeakForms("the failing plugin's password", reg.Username(), brokenPass)...))
	})
}

// testWarm: the ImageWarm names no secret; the agent ran the plugin for
// the image, the image is Present, and the NodeWarm lists both providers.
func testWarm(t *testing.T, f *testbed.Fleet, plugin *testbed.CredentialPlugin) {
	node := only(f)
	testbed.Eventually(t, 2*time.Minute, app+" Present", func() error {
		img, err := f.NodeImage(node.Name, app)
		if err != nil {
			return err
		}
		if img.State != warmv1.ImagePresent {
			return fmt.Errorf("state %s reason %s: %s", img.State, img.Reason, img.Message)
		}
		return nil
	})
	if err := node.AllPresent(t, app); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(plugin.Runs(t), func(r string) bool { return strings.HasPrefix(r, mirrored+"/private/app") }) {
		t.Errorf("plugin runs %q: none for %s", plugin.Runs(t), app)
	}
	if got := node.Metric(t, "warmer_credential_provider_runs_total", `provider="`+good+`"`, `result="Success"`); got < 1 {
		t.Errorf("runs{%s,Success} = %v; want at least 1", good, got)
	}
	nw, err := f.NodeWarm(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(nw.Status.CredentialProviders, []string{good, failing}) {
		t.Errorf("NodeWarm credentialProviders = %v, want [%s %s]", nw.Status.CredentialProviders, good, failing)
	}
}

// testPodUsesWarm: a Pod with no imagePullSecrets runs the warmed image,
// and the kubelet says it was already there (no pull).
func testPodUsesWarm(t *testing.T, n *testbed.RealNode) {
	pod := runPod(t, n, "app", app)
	waitRunning(t, n, pod)
	testbed.Eventually(t, 30*time.Second, "the kubelet saying the image was there", func() error {
		evs := testbed.EventLines(n.PodEvents(t, pod))
		if slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Pulling:") }) {
			t.Fatalf("the kubelet pulled the warmed image: %q", evs)
		}
		if !slices.ContainsFunc(evs, func(e string) bool {
			return strings.HasPrefix(e, "Pulled:") && strings.Contains(e, "already present on machine")
		}) {
			return fmt.Errorf("events %q", evs)
		}
		return nil
	})
}

// testKubeletPulls: the kubelet pulls an image nobody warmed, for a Pod
// without imagePullSecrets, through the plugin: proof it runs the same
// configuration (the registry refuses a pull without the login).
func testKubeletPulls(t *testing.T, n *testbed.RealNode, plugin *testbed.CredentialPlugin) {
	pod := runPod(t, n, "direct", direct)
	waitRunning(t, n, pod)
	if !slices.ContainsFunc(testbed.EventLines(n.PodEvents(t, pod)), func(e string) bool {
		return strings.HasPrefix(e, "Pulled:") && strings.Contains(e, "Successfully pulled")
	}) {
		t.Errorf("no pull event for %s: %q", direct, testbed.EventLines(n.PodEvents(t, pod)))
	}
	if !slices.ContainsFunc(plugin.Runs(t), func(r string) bool { return strings.HasPrefix(r, mirrored+"/private/direct") }) {
		t.Errorf("plugin runs %q: the kubelet never ran it for %s", plugin.Runs(t), direct)
	}
}

// testFailing: the failing plugin's image ends CredentialProviderFailed in
// the NodeWarm and the ImageWarm, while the first image stays Present.
func testFailing(t *testing.T, f *testbed.Fleet) {
	node := only(f)
	testbed.Eventually(t, time.Minute, "CredentialProviderFailed on "+broken, func() error {
		img, err := f.NodeImage(node.Name, broken)
		if err != nil {
			return err
		}
		if img.Reason != "CredentialProviderFailed" || !strings.Contains(img.Message, failing) {
			return fmt.Errorf("state %s reason %q: %s", img.State, img.Reason, img.Message)
		}
		return nil
	})
	testbed.Eventually(t, 30*time.Second, "the ImageWarm's failure reason", func() error {
		for _, fl := range f.ImageWarm(t, ns, "broken").Status.Failures {
			if fl.Reason == "CredentialProviderFailed" {
				return nil
			}
		}
		return fmt.Errorf("failures %+v", f.ImageWarm(t, ns, "broken").Status.Failures)
	})
	if img, err := f.NodeImage(node.Name, app); err != nil || img.State != warmv1.ImagePresent {
		t.Errorf("%s after the failure: %+v, %v; want Present", app, img, err)
	}
	if node.Agent.Exited() {
		t.Fatalf("the agent exited:\n%s", node.Agent.Log(30))
	}
}

// testNoLeak searches the agent's and the controller's logs, every event,
// every status and the agent's /metrics for the credentials, after
// checking each text covers what the test did.
func testNoLeak(t *testing.T, f *testbed.Fleet, n *testbed.RealNode, needles []hostcheck.Needle) {
	node := only(f)
	shown := map[string]string{
		"the agent's log":      readFile(t, node.Agent.LogPath()),
		"the controller's log": readFile(t, f.Controller.LogPath()),
		"the agent's /metrics": scrape(t, node.Metrics),
	}
	var evs eventsv1.EventList
	var core corev1.EventList
	var iws warmv1.ImageWarmList
	var nws warmv1.NodeWarmList
	for what, list := range map[string]client.ObjectList{"events.k8s.io events": &evs, "core events": &core, "ImageWarms": &iws, "NodeWarms": &nws} {
		if err := n.Client.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(list)
		shown[what] = string(b)
	}
	hostcheck.SearchLeaks(t, shown, map[string][]string{
		"the agent's log":      {failing, broken},
		"the agent's /metrics": {`result="PluginFailed"`, `result="Success"`},
		"NodeWarms":            {"CredentialProviderFailed", good},
		"ImageWarms":           {"CredentialProviderFailed"},
		"core events":          {"already present on machine"},
	}, needles)
}

func only(f *testbed.Fleet) *testbed.Node {
	for _, n := range f.Nodes {
		return n
	}
	panic("a fleet without a node")
}

// runPod creates a Pod of img with no imagePullSecrets.
func runPod(t *testing.T, n *testbed.RealNode, name, img string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			// The test bed's pods use the host's network (no pod network).
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: img}},
		},
	}
	if err := n.Client.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return pod
}

func waitRunning(t *testing.T, n *testbed.RealNode, pod *corev1.Pod) {
	t.Helper()
	testbed.Eventually(t, 2*time.Minute, "pod "+pod.Name+" running", func() error {
		var p corev1.Pod
		if err := n.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s; events %q", p.Status.Phase, testbed.EventLines(n.PodEvents(t, pod)))
		}
		return nil
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func scrape(t *testing.T, hostPort string) string {
	t.Helper()
	resp, err := http.Get("http://" + hostPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
