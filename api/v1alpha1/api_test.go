package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestAPI runs every API test against one real kube-apiserver with the
// generated CRDs installed.
func TestAPI(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	t.Run("rejects invalid ImageWarms", func(t *testing.T) { testInvalidImageWarms(t, cp) })
	t.Run("accepts valid ImageWarms", func(t *testing.T) { testValidImageWarms(t, cp) })
	t.Run("applies defaults", func(t *testing.T) { testDefaults(t, cp) })
	t.Run("NodeWarm", func(t *testing.T) { testNodeWarm(t, cp) })
	t.Run("NodeWarm at the maximum", func(t *testing.T) { testNodeWarmMaximum(t, cp) })
	t.Run("kubectl", func(t *testing.T) { testKubectl(t, cp) })
}

// imageWarm builds an unstructured ImageWarm from a JSON spec, so that tests
// can send what the Go types could not express.
func imageWarm(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatalf("bad test spec %s: %v", spec, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": s}}
	u.SetAPIVersion(warmv1.GroupVersion.String())
	u.SetKind("ImageWarm")
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

func images(n int) string {
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf("%q", fmt.Sprintf("registry.example:5000/team/app-%d:v1", i))
	}
	return "[" + strings.Join(refs, ",") + "]"
}

func labels(n int) string {
	kv := make([]string, n)
	for i := range kv {
		kv[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return "{" + strings.Join(kv, ",") + "}"
}

var (
	sha256Hex  = strings.Repeat("a", 64)
	longName   = "registry.example/" + strings.Repeat("abcdefghij/", 24) + "x" // 282 characters of name
	longTag    = strings.Repeat("t", 129)
	tooLongRef = "registry.example/" + strings.Repeat("a", 500)
)

func testInvalidImageWarms(t *testing.T, cp *testbed.ControlPlane) {
	cases := []badInputCase{
		{"no images", `{}`, []string{"spec", "spec must list images or artifacts, or take images from workloads with imagesFrom"}},
		{"empty images", `{"images":[]}`, []string{"spec.images", "at least 1"}},
		{"too many images", `{"images":` + images(101) + `}`, []string{"spec.images", "at most 100"}},
		{"duplicate image", `{"images":["nginx:1.27","nginx:1.27"]}`, []string{"spec.images[1]", "Duplicate value"}},
		{"empty reference", `{"images":[""]}`, []string{"spec.images[0]", "at least 1 chars long"}},
		{"upper-case repository", `{"images":["127.0.0.1:5000/Test/app:v1"]}`, []string{"spec.images[0]", msgLowerCase}},
		{"upper-case Docker Hub repository", `{"images":["Library/nginx"]}`, []string{"spec.images[0]", msgLowerCase}},
		{"spaces", `{"images":["nginx latest"]}`, []string{"spec.images[0]", msgCharacters}},
		{"short digest", `{"images":["nginx@sha256:abc"]}`, []string{"spec.images[0]", msgDigest}},
		{"upper-case digest", `{"images":["nginx@sha256:` + strings.ToUpper(sha256Hex) + `"]}`, []string{"spec.images[0]", msgDigest}},
		{"unknown digest algorithm", `{"images":["nginx@md5:` + sha256Hex[:32] + `"]}`, []string{"spec.images[0]", msgDigest}},
		{"tag too long", `{"images":["nginx:` + longTag + `"]}`, []string{"spec.images[0]", msgTag}},
		{"reference too long", `{"images":["` + tooLongRef + `"]}`, []string{"spec.images[0]", "512"}},
		{"repository name too long", `{"images":["` + longName + `:v1"]}`, []string{"spec.images[0]", "at most 255 characters"}},
		{"trailing colon", `{"images":["nginx:"]}`, []string{"spec.images[0]", msgTag}},
		{"leading slash", `{"images":["/nginx"]}`, []string{"spec.images[0]", msgSlashes}},
		{"double slash", `{"images":["team//app"]}`, []string{"spec.images[0]", msgSlashes}},
		{"unicode", `{"images":["ngïnx:1"]}`, []string{"spec.images[0]", msgCharacters}},
		{"second image bad", `{"images":["nginx","bad ref"]}`, []string{"spec.images[1]", msgCharacters}},
		{"unknown operator", `{"images":["nginx"],"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"Near","values":["a"]}]}}`, []string{"spec.nodeSelector.matchExpressions[0].operator", "Unsupported value"}},
		{"In without values", `{"images":["nginx"],"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"In"}]}}`, []string{"spec.nodeSelector.matchExpressions[0]", "values must be non-empty for In and NotIn"}},
		{"Exists with values", `{"images":["nginx"],"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"Exists","values":["a"]}]}}`, []string{"spec.nodeSelector.matchExpressions[0]", "absent for Exists"}},
		{"bad expression key", `{"images":["nginx"],"nodeSelector":{"matchExpressions":[{"key":"bad key","operator":"Exists"}]}}`, []string{"spec.nodeSelector.matchExpressions[0].key", msgKeyName}},
		{"bad expression value", `{"images":["nginx"],"nodeSelector":{"matchExpressions":[{"key":"zone","operator":"In","values":["-a-"]}]}}`, []string{"spec.nodeSelector.matchExpressions[0].values[0]", msgLabelValue}},
		{"bad matchLabels key", `{"images":["nginx"],"nodeSelector":{"matchLabels":{"bad key":"a"}}}`, []string{"spec.nodeSelector", "matchLabels keys must be valid label keys"}},
		{"bad matchLabels value", `{"images":["nginx"],"nodeSelector":{"matchLabels":{"zone":"a b"}}}`, []string{"spec.nodeSelector.matchLabels[zone]", msgLabelValue}},
		{"too many matchLabels", `{"images":["nginx"],"nodeSelector":{"matchLabels":` + labels(33) + `}}`, []string{"spec.nodeSelector.matchLabels", "at most 32"}},
		{"unknown pullPolicy", `{"images":["nginx"],"pullPolicy":"Never"}`, []string{"spec.pullPolicy", "Unsupported value"}},
		{"refreshInterval without Always", `{"images":["nginx"],"refreshInterval":"1h"}`, []string{"spec", "refreshInterval is only allowed with pullPolicy Always"}},
		{"refreshInterval too short", `{"images":["nginx"],"pullPolicy":"Always","refreshInterval":"5s"}`, []string{"spec.refreshInterval", "at least 1m"}},
		{"refreshInterval not a duration", `{"images":["nginx"],"pullPolicy":"Always","refreshInterval":"soon"}`, []string{"spec.refreshInterval", msgRefreshDuration}},
		{"pullTimeout too short", `{"images":["nginx"],"pullTimeout":"1s"}`, []string{"spec.pullTimeout", "between 10s and 24h"}},
		{"pullTimeout too long", `{"images":["nginx"],"pullTimeout":"25h"}`, []string{"spec.pullTimeout", "between 10s and 24h"}},
		{"bad secret name", `{"images":["nginx"],"imagePullSecrets":[{"name":"Bad_Name"}]}`, []string{"spec.imagePullSecrets[0].name", msgSecretName}},
		{"duplicate secret", `{"images":["nginx"],"imagePullSecrets":[{"name":"a"},{"name":"a"}]}`, []string{"spec.imagePullSecrets[1]", "Duplicate value"}},
		{"too many secrets", `{"images":["nginx"],"imagePullSecrets":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d"},{"name":"e"},{"name":"f"},{"name":"g"},{"name":"h"},{"name":"i"}]}`, []string{"spec.imagePullSecrets", "at most 8"}},
		{"priority too high", `{"images":["nginx"],"priority":5000}`, []string{"spec.priority", "less than or equal to 1000"}},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d invalid cases", len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectInvalid(t, cp, fmt.Sprintf("invalid-%d", i), c) })
	}
}

func testValidImageWarms(t *testing.T, cp *testbed.ControlPlane) {
	cases := []struct{ name, spec string }{
		{"short name", `{"images":["nginx"]}`},
		{"many forms", `{"images":["nginx:1.27","library/nginx","docker.io/library/nginx:latest","localhost/app","localhost:5000/app:v1","127.0.0.1:5000/team/app:v1","[::1]:5000/app:v1","registry.example/a/b/c:v1.2-rc_3","registry.example/app@sha256:` + sha256Hex + `","nginx:1.27@sha256:` + sha256Hex + `","my-registry.example:443/team_a/app__x/app--y:1"]}`},
		{"hundred images", `{"images":` + images(100) + `}`},
		{"images from every workload", `{"imagesFrom":{"workloadSelector":{}}}`},
		{"artifacts alone", `{"artifacts":["registry.example/models/llama:v1","registry.example/models/llama@sha256:` + sha256Hex + `"]}`},
		{"images and artifacts, 100 in all", `{"images":` + images(98) + `,"artifacts":["registry.example/models/a:v1","registry.example/models/b:v1"]}`},
		{"images and imagesFrom", `{"images":["nginx"],"imagesFrom":{"workloadSelector":{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["test"]}]},"kinds":["Deployment","StatefulSet","DaemonSet","Job","CronJob"]}}`},
		{"full spec", `{"images":["nginx"],"nodeSelector":{"matchLabels":{"node-role.kubernetes.io/worker":"","zone":"a"},"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64","arm64"]},{"key":"gpu","operator":"DoesNotExist"}]},"pullPolicy":"Always","refreshInterval":"1h30m","imagePullSecrets":[{"name":"regcred"},{"name":"other.cred"}],"priority":-10,"suspend":true,"pullTimeout":"10m","retention":"Pinned"}`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := cp.Client.Create(context.Background(), imageWarm(t, fmt.Sprintf("valid-%d", i), c.spec)); err != nil {
				t.Fatalf("rejected %s: %v", c.spec, err)
			}
		})
	}
}

func testDefaults(t *testing.T, cp *testbed.ControlPlane) {
	ctx := context.Background()
	if err := cp.Client.Create(ctx, imageWarm(t, "defaults", `{"images":["nginx"]}`)); err != nil {
		t.Fatal(err)
	}
	var iw warmv1.ImageWarm
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "defaults"}, &iw); err != nil {
		t.Fatal(err)
	}
	if iw.Spec.PullPolicy != warmv1.PullIfNotPresent {
		t.Errorf("pullPolicy defaulted to %q, want IfNotPresent", iw.Spec.PullPolicy)
	}
	if iw.Spec.Retention != warmv1.RetentionUnpinned {
		t.Errorf("retention defaulted to %q, want Unpinned", iw.Spec.Retention)
	}
	if iw.Spec.Priority != 0 || iw.Spec.Suspend || iw.Spec.NodeSelector != nil {
		t.Errorf("unexpected defaults: %+v", iw.Spec)
	}
	sel, err := iw.Spec.NodeSelector.AsSelector()
	if err != nil || !sel.Empty() {
		t.Errorf("absent selector should select everything, got %v, %v", sel, err)
	}
}

func testNodeWarm(t *testing.T, cp *testbed.ControlPlane) {
	ctx := context.Background()
	nw := &warmv1.NodeWarm{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err := cp.Client.Create(ctx, nw); err != nil {
		t.Fatalf("creating a NodeWarm: %v", err)
	}
	nw.Status = warmv1.NodeWarmStatus{
		Runtime: warmv1.RuntimeInfo{Name: "containerd", Version: "1.6.20"},
		Images: []warmv1.NodeImage{
			{Image: "docker.io/library/nginx:latest", State: warmv1.ImagePresent},
			{Image: "docker.io/library/redis:latest", State: warmv1.ImagePulling, LastTransitionTime: ptr.To(metav1.Now())},
		},
		Desired: 2, Present: 1, Pulling: 1,
	}
	if err := cp.Client.Status().Update(ctx, nw); err != nil {
		t.Fatalf("writing NodeWarm status: %v", err)
	}
	nw.Status.Images[0].State = "Bogus"
	err := cp.Client.Status().Update(ctx, nw)
	if err == nil || !strings.Contains(err.Error(), "status.images[0].state") {
		t.Fatalf("want a rejected state naming status.images[0].state, got %v", err)
	}
	testCredentialProvidersStatus(t, cp, nw)
	testCredentialKeyStatus(t, cp, nw)
}

// testCredentialKeyStatus: an X25519 key is kept; another KEM, or a key
// of another size, is refused with the field named.
func testCredentialKeyStatus(t *testing.T, cp *testbed.ControlPlane, nw *warmv1.NodeWarm) {
	ctx := context.Background()
	nw.Status.CredentialProviders = nil
	// Every byte value, "+" and "/" in the base64 included.
	for _, key := range [][]byte{make([]byte, 32), []byte(strings.Repeat("\xfb\xff", 16)), []byte("0123456789abcdefghijklmnopqrstuv")} {
		nw.Status.CredentialKey = &warmv1.CredentialKey{KEM: warmv1.KEMX25519, PublicKey: key}
		if err := cp.Client.Status().Update(ctx, nw); err != nil {
			t.Fatalf("writing credentialKey %x: %v", key, err)
		}
	}
	for name, bad := range map[string]warmv1.CredentialKey{
		"KEM P-256 (16)":  {KEM: 16, PublicKey: make([]byte, 32)},
		"a 31-byte key":   {KEM: warmv1.KEMX25519, PublicKey: make([]byte, 31)},
		"a 1216-byte key": {KEM: warmv1.KEMX25519, PublicKey: make([]byte, 1216)},
		"no key":          {KEM: warmv1.KEMX25519},
	} {
		nw.Status.CredentialKey = &bad
		err := cp.Client.Status().Update(ctx, nw)
		if err == nil || !strings.Contains(err.Error(), "status.credentialKey") {
			t.Errorf("%s: want a refusal naming status.credentialKey, got %v", name, err)
		}
	}
}

// testCredentialProvidersStatus: provider names are kept, and too many or
// too long are refused with the field named.
func testCredentialProvidersStatus(t *testing.T, cp *testbed.ControlPlane, nw *warmv1.NodeWarm) {
	ctx := context.Background()
	nw.Status.Images[0].State = warmv1.ImagePresent
	nw.Status.CredentialProviders = []string{"ecr-credential-provider", "acr-credential-provider"}
	if err := cp.Client.Status().Update(ctx, nw); err != nil {
		t.Fatalf("writing credentialProviders: %v", err)
	}
	for name, bad := range map[string][]string{
		"17 providers":    strings.Split(strings.Repeat("p,", 16)+"p", ","),
		"a 254-byte name": {strings.Repeat("p", 254)},
	} {
		nw.Status.CredentialProviders = bad
		err := cp.Client.Status().Update(ctx, nw)
		if err == nil || !strings.Contains(err.Error(), "status.credentialProviders") {
			t.Errorf("%s: want a refusal naming status.credentialProviders, got %v", name, err)
		}
	}
}
