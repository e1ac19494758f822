package deploy

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestAgentReadsKubeletStats runs the agent binary as a Pod's token makes
// it: a service-account token bound to a Pod on node-a, issued by the real
// API server, with config/default's RBAC and policy in force. Its disk
// guard reads the image filesystem's level from a kubelet stand-in that
// authenticates and authorizes each request the way a kubelet with webhook
// authentication and authorization does (TokenReview, then a
// SubjectAccessReview for nodes/stats), on the real API server. No kubelet
// runs in this test bed; the stand-in serves the Summary API's fields the
// agent reads and reports a level the test chooses. The agent runs as a
// process that could also statfs containerd's files, which are nowhere
// near full: blocked pulls show the kubelet's figure is the one used.
func TestAgentReadsKubeletStats(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	install(t, cp)
	reg := testbed.StartRegistry(t, testbed.RegistryOptions{Name: "stats"})
	img := reg.PushRandom(t, "stats/small:v1", testbed.ImageOptions{LayerSize: testbed.MB})
	ctd := testbed.StartContainerd(t, ownNode)
	cp.CreateNode(t, ownNode, nil)
	kubelet := startKubeletStandIn(t, cp, ownNode)
	kubelet.percent.Store(95)

	bin := testbed.BuildWarmer(t)
	agent := testbed.StartProcess(t, "agent", append([]string{bin, "agent",
		"--kubeconfig", tokenKubeconfig(t, cp, podBoundToken(t, cp, ownNode)),
		"--node-name", ownNode, "--container-runtime-endpoint", ctd.Endpoint,
		"--kubelet-address", kubelet.host, "--kubelet-port", kubelet.port,
		"--kubelet-certificate-authority", kubelet.caFile}, noListeners...)...)

	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace}},
		&warmv1.ImageWarm{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: warmName},
			Spec:       warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{warmv1.ImageReference(img.Ref)}},
		},
	} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	nodeImage := func() (warmv1.NodeWarm, warmv1.NodeImage, error) {
		var nw warmv1.NodeWarm
		if err := cp.Client.Get(ctx, types.NamespacedName{Name: ownNode}, &nw); err != nil {
			return nw, warmv1.NodeImage{}, err
		}
		for _, im := range nw.Status.Images {
			if im.Image == img.Ref {
				return nw, im, nil
			}
		}
		return nw, warmv1.NodeImage{}, fmt.Errorf("%s not in the NodeWarm yet", img.Ref)
	}
	testbed.Eventually(t, 60*time.Second, "the pull held back at 95 %", func() error {
		nw, im, err := nodeImage()
		if err != nil {
			return err
		}
		if im.Reason != "DiskPressure" || nw.Status.ImageFilesystem == nil || nw.Status.ImageFilesystem.UsedPercent != 95 {
			return fmt.Errorf("image %s %s, filesystem %+v", im.State, im.Reason, nw.Status.ImageFilesystem)
		}
		return nil
	})

	kubelet.percent.Store(10)
	testbed.Eventually(t, 60*time.Second, "the pull once the kubelet reports space", func() error {
		_, im, err := nodeImage()
		if err != nil {
			return err
		}
		if im.State != warmv1.ImagePresent {
			return fmt.Errorf("image %s %s: %s", im.State, im.Reason, im.Message)
		}
		return nil
	})
	if n, refused := kubelet.served.Load(), kubelet.refused.Load(); n == 0 || refused > 0 {
		t.Errorf("the kubelet stand-in served %d summaries and refused %d requests", n, refused)
	}
	if lines := forbidden(t, agent); len(lines) > 0 {
		t.Errorf("the agent was refused something:\n%s", strings.Join(lines, "\n"))
	}
}

// kubeletStandIn answers /stats/summary for one node after checking the
// caller as a kubelet does.
type kubeletStandIn struct {
	host, port, caFile string
	percent            atomic.Int64 // the image filesystem's fill level to report
	served, refused    atomic.Int64
}

func startKubeletStandIn(t *testing.T, cp *testbed.ControlPlane, node string) *kubeletStandIn {
	t.Helper()
	k := &kubeletStandIn{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, msg := k.authorize(r, cp.Client, node); status != http.StatusOK {
			k.refused.Add(1)
			http.Error(w, msg, status)
			return
		}
		const capacity = 100 << 30
		avail := capacity / 100 * (100 - k.percent.Load())
		k.served.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"node": map[string]any{"nodeName": node, "runtime": map[string]any{
			"imageFs": map[string]any{"capacityBytes": capacity, "availableBytes": avail, "usedBytes": 1 << 20},
		}}})
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	k.host, k.port, _ = net.SplitHostPort(u.Host)
	k.caFile = filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(k.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// authorize does what the kubelet's webhook authentication and
// authorization do for GET /stats/summary.
func (k *kubeletStandIn) authorize(r *http.Request, admin client.Client, node string) (int, string) {
	if r.URL.Path != "/stats/summary" {
		return http.StatusNotFound, "not served by this stand-in"
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return http.StatusUnauthorized, "Unauthorized"
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := admin.Create(r.Context(), tr); err != nil || !tr.Status.Authenticated {
		return http.StatusUnauthorized, "Unauthorized"
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for key, v := range u.Extra {
		extra[key] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "stats", Name: node},
	}}
	if err := admin.Create(r.Context(), sar); err != nil || !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[stats])", u.Username)
	}
	return http.StatusOK, ""
}

// podBoundToken returns a warmer-agent token bound to a Pod scheduled on
// node, as the kubelet gets one for the agent's Pod: the API server
// records the node in it.
func podBoundToken(t *testing.T, cp *testbed.ControlPlane, node string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "warmer-agent-test"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "warmer-agent",
			Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/warmer-dev/warmer:test"}}},
	}
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "warmer-agent"}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := cp.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("requesting a token: %v", err)
	}
	return tr.Status.Token
}

// tokenKubeconfig writes a kubeconfig for cp that authenticates with token.
func tokenKubeconfig(t *testing.T, cp *testbed.ControlPlane, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "agent"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
