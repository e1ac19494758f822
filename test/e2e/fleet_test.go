package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// fleet is the control plane, the warmer controller and simulated nodes,
// each a containerd with a Node object and an agent process.
type fleet struct {
	cp    *testbed.ControlPlane
	bin   string
	nodes map[string]*simNode
}

type simNode struct {
	name    string
	ctd     *testbed.Containerd
	cri     runtimeapi.ImageServiceClient
	agent   *testbed.Process
	metrics string // host:port of the agent's /metrics
}

// agentFlags are the agent settings of the e2e fleet: a short resync so
// drift is caught quickly, and a back-off long enough that "fixed without
// waiting out the back-off" can be told apart from waiting it out.
var agentFlags = []string{
	"--resync-period=3s",
	"--image-pull-backoff-initial=30s",
	"--image-pull-backoff-max=60s",
	"--status-progress-interval=500ms",
	"--zap-log-level=debug",
}

func startFleet(t *testing.T, labels map[string]map[string]string) *fleet {
	f := &fleet{cp: testbed.StartControlPlane(t), bin: testbed.BuildWarmer(t), nodes: map[string]*simNode{}}
	for name, l := range labels {
		n := &simNode{name: name, ctd: testbed.StartContainerd(t, name)}
		n.cri = n.ctd.ImageService(t)
		f.cp.CreateNode(t, name, l)
		n.metrics = fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
		args := append([]string{"agent", "--kubeconfig", f.cp.Kubeconfig, "--node-name", name,
			"--container-runtime-endpoint", n.ctd.Endpoint, "--metrics-bind-address", n.metrics,
			"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))}, agentFlags...)
		n.agent = testbed.StartProcess(t, "agent "+name, append([]string{f.bin}, args...)...)
		f.nodes[name] = n
	}
	testbed.StartProcess(t, "controller", f.bin, "controller", "--kubeconfig", f.cp.Kubeconfig,
		"--leader-election-namespace", "default", "--min-status-interval", "300ms",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t)),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t)))
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range f.nodes {
				t.Logf("agent %s log:\n%s", n.name, n.agent.Log(60))
			}
		}
	})
	return f
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// present says whether the node's runtime holds ref.
func (n *simNode) present(t *testing.T, ref string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.cri.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("ImageStatus %s on %s: %v", ref, n.name, err)
	}
	return resp.Image != nil
}

// allPresent returns an error naming the first ref the node lacks.
func (n *simNode) allPresent(t *testing.T, refs ...string) error {
	for _, r := range refs {
		if !n.present(t, r) {
			return fmt.Errorf("%s lacks %s", n.name, r)
		}
	}
	return nil
}

func (n *simNode) remove(t *testing.T, ref string) {
	t.Helper()
	if _, err := n.cri.RemoveImage(context.Background(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("removing %s on %s: %v", ref, n.name, err)
	}
}

// nodeImage returns the NodeWarm entry for a normalised image on a node.
func (f *fleet) nodeImage(node, image string) (warmv1.NodeImage, error) {
	var nw warmv1.NodeWarm
	if err := f.cp.Client.Get(context.Background(), types.NamespacedName{Name: node}, &nw); err != nil {
		return warmv1.NodeImage{}, err
	}
	for _, img := range nw.Status.Images {
		if img.Image == image {
			return img, nil
		}
	}
	return warmv1.NodeImage{}, fmt.Errorf("NodeWarm %s does not list %s (has %d images)", node, image, len(nw.Status.Images))
}

func (f *fleet) imageWarm(t *testing.T, ns, name string) *warmv1.ImageWarm {
	t.Helper()
	var iw warmv1.ImageWarm
	if err := f.cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &iw); err != nil {
		t.Fatal(err)
	}
	return &iw
}

func (f *fleet) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := f.cp.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func newWarm(ns, name string, selector map[string]warmv1.LabelValue, images ...string) *warmv1.ImageWarm {
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, img := range images {
		iw.Spec.Images = append(iw.Spec.Images, warmv1.ImageReference(img))
	}
	if selector != nil {
		iw.Spec.NodeSelector = &warmv1.NodeSelector{MatchLabels: selector}
	}
	return iw
}

// events lists the events.k8s.io events about an ImageWarm with a reason.
func (f *fleet) events(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := f.cp.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func (f *fleet) kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return f.cp.Kubectl(t, args...)
}

// metric returns the sum of a counter's samples whose labels contain
// every fragment, scraped from an agent's /metrics.
func (n *simNode) metric(t *testing.T, name string, fragments ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", n.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, fr := range fragments {
			ok = ok && strings.Contains(line, fr)
		}
		if ok {
			var v float64
			_, _ = fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

func dockerConfigSecret(ns, name, host, user, pass string) *corev1.Secret {
	cfg := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q}}}`, host, user, pass)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)},
	}
}

func nodeKey(name string) types.NamespacedName { return types.NamespacedName{Name: name} }
