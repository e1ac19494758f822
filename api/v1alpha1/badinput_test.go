package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// badInputCase is one spec the API server must refuse, with fragments its
// message must contain: the field path first, then what is wrong.
type badInputCase struct {
	name, spec string
	want       []string
}

// sel wraps a nodeSelector in a spec with one good image.
func sel(s string) string { return `{"images":["nginx"],"nodeSelector":` + s + `}` }

// secrets wraps imagePullSecrets in a spec with one good image.
func secrets(s string) string { return `{"images":["nginx"],"imagePullSecrets":` + s + `}` }

// img is a spec with the given JSON-quoted references.
func img(refs ...string) string {
	b, err := json.Marshal(refs)
	if err != nil {
		panic(err)
	}
	return `{"images":` + string(b) + `}`
}

// The refusals in words, each a fragment of one rule's message in the
// generated CRD: a user meets these, never a raw pattern.
const (
	msgCharacters      = "an image reference holds only ASCII letters, digits and . _ - : / @"
	msgScheme          = "an image reference has no scheme"
	msgDigest          = "the digest, after @, must be sha256: and 64, sha384: and 96, or sha512: and 128 lower-case hex digits"
	msgTag             = "the tag, after the last :, must be 1 to 128 letters, digits, _ . or -"
	msgStart           = "an image reference starts with the repository name"
	msgSlashes         = "the parts of the repository name are separated by single slashes"
	msgHost            = "the registry host, before the first /, must be a DNS name"
	msgLowerCase       = "repository names are lower case"
	msgParts           = "each part of the repository name is letters and digits joined by one ., one or two _, or dashes"
	msgKeySlashes      = "a label key has at most one /"
	msgKeyName         = "the name of a label key, after the / if it has a prefix, is 1 to 63 letters"
	msgKeyPrefix       = "the prefix of a label key, before the /, is a DNS subdomain"
	msgLabelValue      = "a label value is empty or up to 63 letters, digits, -, _ and ., starting and ending with a letter or digit"
	msgSecretNamespace = "only Secrets in the ImageWarm's own namespace can be used"
	msgSecretName      = "a Secret's name is lower-case letters, digits, - and ."
	msgRefreshDuration = "refreshInterval is a duration: numbers each followed by a unit"
	msgTimeoutDuration = "pullTimeout is a duration: numbers each followed by a unit"
)

// rawPattern is how the API server words a failed OpenAPI pattern; no
// refusal of an ImageWarm spec may read so.
const rawPattern = "should match"

// referenceCases widen api_test.go's reference cases: white space, unicode,
// digests, tags, separators and lengths at their edges.
var referenceCases = []badInputCase{
	{"only a space", img(" "), []string{"spec.images[0]", msgCharacters}},
	{"leading space", img(" nginx"), []string{"spec.images[0]", msgCharacters}},
	{"trailing space", img("nginx "), []string{"spec.images[0]", msgCharacters}},
	{"tab", img("nginx\t:1"), []string{"spec.images[0]", msgCharacters}},
	{"newline", img("nginx\n"), []string{"spec.images[0]", msgCharacters}},
	{"NUL byte", img("nginx\x00"), []string{"spec.images[0]", msgCharacters}},
	{"unicode in tag", img("nginx:1.0ü"), []string{"spec.images[0]", msgCharacters}},
	{"unicode registry", img("régistry.example/app"), []string{"spec.images[0]", msgCharacters}},
	{"emoji tag", img("nginx:🚀"), []string{"spec.images[0]", msgCharacters}},
	{"fullwidth letters", img("ｎｇｉｎｘ"), []string{"spec.images[0]", msgCharacters}},
	{"all upper case", img("NGINX"), []string{"spec.images[0]", msgLowerCase}},
	{"upper case in a later path component", img("team/App:v1"), []string{"spec.images[0]", msgLowerCase}},
	{"digest without algorithm", img("nginx@" + sha256Hex), []string{"spec.images[0]", msgDigest}},
	{"sha256 digest of 63 hex", img("nginx@sha256:" + sha256Hex[:63]), []string{"spec.images[0]", msgDigest}},
	{"sha256 digest of 65 hex", img("nginx@sha256:" + sha256Hex + "a"), []string{"spec.images[0]", msgDigest}},
	{"non-hex digest", img("nginx@sha256:" + strings.Repeat("z", 64)), []string{"spec.images[0]", msgDigest}},
	{"sha512 digest of sha256 length", img("nginx@sha512:" + sha256Hex), []string{"spec.images[0]", msgDigest}},
	{"two digests", img("nginx@sha256:" + sha256Hex + "@sha256:" + sha256Hex), []string{"spec.images[0]", msgDigest}},
	{"tag after digest", img("nginx@sha256:" + sha256Hex + ":v1"), []string{"spec.images[0]", msgDigest}},
	{"empty tag before digest", img("nginx:@sha256:" + sha256Hex), []string{"spec.images[0]", msgTag}},
	{"empty digest", img("nginx@"), []string{"spec.images[0]", msgDigest}},
	{"tag starting with a dot", img("nginx:.v1"), []string{"spec.images[0]", msgTag}},
	{"tag starting with a dash", img("nginx:-v1"), []string{"spec.images[0]", msgTag}},
	{"slash in tag", img("nginx:v1/x"), []string{"spec.images[0]", msgHost}},
	{"port not numeric", img("registry.example:abc/app"), []string{"spec.images[0]", msgHost}},
	{"URL scheme", img("https://registry.example/app"), []string{"spec.images[0]", msgScheme}},
	{"trailing slash", img("nginx/"), []string{"spec.images[0]", msgSlashes}},
	{"double colon", img("nginx::v1"), []string{"spec.images[0]", msgTag}},
	{"component starting with a dash", img("team/-app"), []string{"spec.images[0]", msgParts}},
	{"component ending with a dash", img("team/app-"), []string{"spec.images[0]", msgParts}},
	{"two dots in a component", img("team/a..b"), []string{"spec.images[0]", msgParts}},
	{"three underscores", img("team/a___b"), []string{"spec.images[0]", msgParts}},
	{"only a tag", img(":v1"), []string{"spec.images[0]", msgStart}},
	{"only a digest", img("@sha256:" + sha256Hex), []string{"spec.images[0]", msgStart}},
	{"scheme with a port", img("http://localhost:5000/app"), []string{"spec.images[0]", msgScheme}},
	{"host ending with a dash", img("registry-.example:5000/app"), []string{"spec.images[0]", msgHost}},
	{"IPv6 host without brackets' close", img("[::1:5000/app"), []string{"spec.images[0]", msgHost}},
	{"colon in a later path component", img("team/app:v1/x"), []string{"spec.images[0]", msgParts}},
	{"upper case in a tagged repository", img("registry.example/Team/app:v1"), []string{"spec.images[0]", msgLowerCase}},
	{"reference of 513 characters", img("registry.example/" + strings.Repeat("a", 496)), []string{"spec.images[0]", "512"}},
	{"repository of 256 characters", img("registry.example/" + strings.Repeat("a", 239) + ":v1"), []string{"spec.images[0]", "at most 255 characters"}},
	{"null reference", `{"images":[null]}`, []string{"spec.images[0]"}},
	{"number as reference", `{"images":[42]}`, []string{"spec.images[0]", "string"}},
	{"images not a list", `{"images":"nginx"}`, []string{"spec.images", "array"}},
	{"three copies of one image", img("nginx", "redis", "nginx", "nginx"), []string{"spec.images[2]", "Duplicate value"}},
	{"duplicate digest reference", img("nginx@sha256:"+sha256Hex, "nginx@sha256:"+sha256Hex), []string{"spec.images[1]", "Duplicate value"}},
	{"a thousand images", `{"images":` + images(1000) + `}`, []string{"spec.images", "at most 100"}},
}

// artifacts wraps a list of artifacts in a spec without images.
func artifacts(refs ...string) string {
	b, _ := json.Marshal(refs)
	return `{"artifacts":` + string(b) + `}`
}

var artifactCases = []badInputCase{
	{"artifact with a scheme", artifacts("oci://registry.example/models/llama:v1"), []string{"spec.artifacts[0]", msgScheme}},
	{"upper case in an artifact's repository", artifacts("registry.example/Models/llama:v1"), []string{"spec.artifacts[0]", msgLowerCase}},
	{"artifact listed twice", artifacts("registry.example/models/a:v1", "registry.example/models/a:v1"), []string{"spec.artifacts[1]", "Duplicate value"}},
	{"empty artifacts", `{"artifacts":[]}`, []string{"spec.artifacts", "at least 1"}},
	{"artifacts not a list", `{"artifacts":"registry.example/models/a:v1"}`, []string{"spec.artifacts", "array"}},
	{"21 artifacts", `{"artifacts":` + images(21) + `}`, []string{"spec.artifacts", "at most 20"}},
	{"100 images and an artifact", `{"images":` + images(100) + `,"artifacts":["registry.example/models/a:v1"]}`, []string{"spec", "images and artifacts together list at most 100 references"}},
}

var selectorCases = []badInputCase{
	{"too many expressions", sel(`{"matchExpressions":[` + strings.TrimSuffix(strings.Repeat(`{"key":"k","operator":"Exists"},`, 17), ",") + `]}`), []string{"spec.nodeSelector.matchExpressions", "at most 16"}},
	{"too many values", sel(`{"matchExpressions":[{"key":"k","operator":"In","values":[` + strings.TrimSuffix(strings.Repeat(`"v",`, 65), ",") + `]}]}`), []string{"spec.nodeSelector.matchExpressions[0].values", "at most 64"}},
	{"value too long", sel(`{"matchExpressions":[{"key":"k","operator":"In","values":["` + strings.Repeat("v", 64) + `"]}]}`), []string{"spec.nodeSelector.matchExpressions[0].values[0]", "63"}},
	{"key name too long", sel(`{"matchExpressions":[{"key":"` + strings.Repeat("k", 64) + `","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", msgKeyName}},
	{"empty key", sel(`{"matchExpressions":[{"key":"","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key"}},
	{"upper-case key prefix", sel(`{"matchExpressions":[{"key":"Example.com/zone","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", msgKeyPrefix}},
	{"prefix ending with a dot", sel(`{"matchExpressions":[{"key":"example.com./zone","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", msgKeyPrefix}},
	{"empty key name after a prefix", sel(`{"matchExpressions":[{"key":"example.com/","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", msgKeyName}},
	{"two slashes in key", sel(`{"matchExpressions":[{"key":"a/b/c","operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", msgKeySlashes}},
	{"NotIn without values", sel(`{"matchExpressions":[{"key":"zone","operator":"NotIn","values":[]}]}`), []string{"spec.nodeSelector.matchExpressions[0]", "values must be non-empty for In and NotIn"}},
	{"DoesNotExist with values", sel(`{"matchExpressions":[{"key":"zone","operator":"DoesNotExist","values":["a"]}]}`), []string{"spec.nodeSelector.matchExpressions[0]", "absent for Exists and DoesNotExist"}},
	{"lower-case operator", sel(`{"matchExpressions":[{"key":"zone","operator":"in","values":["a"]}]}`), []string{"spec.nodeSelector.matchExpressions[0].operator", "Unsupported value"}},
	{"missing operator", sel(`{"matchExpressions":[{"key":"zone"}]}`), []string{"spec.nodeSelector.matchExpressions[0].operator", "Required"}},
	{"missing key", sel(`{"matchExpressions":[{"operator":"Exists"}]}`), []string{"spec.nodeSelector.matchExpressions[0].key", "Required"}},
	{"empty matchLabels key", sel(`{"matchLabels":{"":"a"}}`), []string{"spec.nodeSelector", "matchLabels keys must be valid label keys"}},
	{"matchLabels key too long", sel(`{"matchLabels":{"` + strings.Repeat("k", 64) + `":"a"}}`), []string{"spec.nodeSelector", "matchLabels keys must be valid label keys"}},
	{"matchLabels value too long", sel(`{"matchLabels":{"zone":"` + strings.Repeat("a", 64) + `"}}`), []string{"spec.nodeSelector.matchLabels.zone", "63"}},
	{"matchLabels value starting with a dash", sel(`{"matchLabels":{"zone":"-a"}}`), []string{"spec.nodeSelector.matchLabels[zone]", msgLabelValue}},
	{"matchLabels value not a string", sel(`{"matchLabels":{"zone":1}}`), []string{"spec.nodeSelector.matchLabels.zone", "string"}},
	{"unicode matchLabels value", sel(`{"matchLabels":{"zone":"zürich"}}`), []string{"spec.nodeSelector.matchLabels[zone]", msgLabelValue}},
	{"selector as a string", sel(`"zone=a"`), []string{"spec.nodeSelector", "object"}},
}

var secretAndOtherCases = []badInputCase{
	{"empty secret name", secrets(`[{"name":""}]`), []string{"spec.imagePullSecrets[0].name"}},
	{"secret without name", secrets(`[{}]`), []string{"spec.imagePullSecrets[0].name", "Required"}},
	{"secret of another namespace as ns/name", secrets(`[{"name":"other/regcred"}]`), []string{"spec.imagePullSecrets[0].name", msgSecretNamespace}},
	{"secret name too long", secrets(`[{"name":"` + strings.Repeat("a", 254) + `"}]`), []string{"spec.imagePullSecrets[0].name", "253"}},
	{"upper-case secret name", secrets(`[{"name":"RegCred"}]`), []string{"spec.imagePullSecrets[0].name", msgSecretName}},
	{"secrets as a string", secrets(`"regcred"`), []string{"spec.imagePullSecrets", "array"}},
	{"priority too low", `{"images":["nginx"],"priority":-1001}`, []string{"spec.priority", "greater than or equal to -1000"}},
	{"priority not a number", `{"images":["nginx"],"priority":"high"}`, []string{"spec.priority", "integer"}},
	{"suspend not a boolean", `{"images":["nginx"],"suspend":"yes"}`, []string{"spec.suspend", "boolean"}},
	{"startupTaint not a boolean", `{"images":["nginx"],"startupTaint":"yes"}`, []string{"spec.startupTaint", "boolean"}},
	{"pullTimeout without unit", `{"images":["nginx"],"pullTimeout":"10"}`, []string{"spec.pullTimeout", msgTimeoutDuration}},
	{"pullTimeout in days", `{"images":["nginx"],"pullTimeout":"1d"}`, []string{"spec.pullTimeout", msgTimeoutDuration}},
	{"pullTimeout with a space", `{"images":["nginx"],"pullTimeout":"10 m"}`, []string{"spec.pullTimeout", msgTimeoutDuration}},
	{"pullTimeout past any duration", `{"images":["nginx"],"pullTimeout":"99999999999h"}`, []string{"spec.pullTimeout", "pullTimeout must be between 10s and 24h"}},
	{"refreshInterval past any duration", `{"images":["nginx"],"pullPolicy":"Always","refreshInterval":"2562048h"}`, []string{"spec.refreshInterval", "under 2562048h"}},
	{"secret name with an underscore", secrets(`[{"name":"reg_cred"}]`), []string{"spec.imagePullSecrets[0].name", msgSecretName}},
	{"negative refreshInterval", `{"images":["nginx"],"pullPolicy":"Always","refreshInterval":"-1h"}`, []string{"spec.refreshInterval", msgRefreshDuration}},
	{"lower-case pullPolicy", `{"images":["nginx"],"pullPolicy":"always"}`, []string{"spec.pullPolicy", "Unsupported value"}},
	{"empty pullPolicy", `{"images":["nginx"],"pullPolicy":""}`, []string{"spec.pullPolicy", "Unsupported value"}},
}

// from wraps imagesFrom in a spec without images.
func from(s string) string { return `{"imagesFrom":` + s + `}` }

var imagesFromCases = []badInputCase{
	{"neither images nor imagesFrom", `{}`, []string{"spec", "spec must list images or artifacts, or take images from workloads with imagesFrom"}},
	{"imagesFrom null and no images", `{"imagesFrom":null}`, []string{"spec", "spec must list images or artifacts, or take images from workloads with imagesFrom"}},
	{"empty images beside imagesFrom", `{"images":[],"imagesFrom":{"workloadSelector":{}}}`, []string{"spec.images", "at least 1"}},
	{"imagesFrom without workloadSelector", from(`{}`), []string{"spec.imagesFrom.workloadSelector", "Required"}},
	{"imagesFrom as a list", from(`[{"workloadSelector":{}}]`), []string{"spec.imagesFrom", "object"}},
	{"Pod is not a workload kind", from(`{"workloadSelector":{},"kinds":["Pod"]}`), []string{"spec.imagesFrom.kinds[0]", "Unsupported value"}},
	{"lower-case kind", from(`{"workloadSelector":{},"kinds":["deployment"]}`), []string{"spec.imagesFrom.kinds[0]", "Unsupported value"}},
	{"ReplicaSet is not read", from(`{"workloadSelector":{},"kinds":["ReplicaSet"]}`), []string{"spec.imagesFrom.kinds[0]", "Unsupported value"}},
	{"kind twice", from(`{"workloadSelector":{},"kinds":["Job","Job"]}`), []string{"spec.imagesFrom.kinds[1]", "Duplicate value"}},
	{"empty kinds", from(`{"workloadSelector":{},"kinds":[]}`), []string{"spec.imagesFrom.kinds", "at least 1"}},
	{"workloadSelector as a string", from(`{"workloadSelector":"app=web"}`), []string{"spec.imagesFrom.workloadSelector", "object"}},
	{"bad workloadSelector label key", from(`{"workloadSelector":{"matchLabels":{"-app":"web"}}}`), []string{"spec.imagesFrom.workloadSelector", "matchLabels keys must be valid label keys"}},
	{"workloadSelector In without values", from(`{"workloadSelector":{"matchExpressions":[{"key":"app","operator":"In"}]}}`), []string{"spec.imagesFrom.workloadSelector.matchExpressions[0]", "values must be non-empty for In and NotIn"}},
	{"workloadSelector value too long", from(`{"workloadSelector":{"matchLabels":{"app":"` + strings.Repeat("a", 64) + `"}}}`), []string{"spec.imagesFrom.workloadSelector.matchLabels.app", "63"}},
}

// readiness wraps spec.readiness in a spec with one good image.
func readiness(s string) string { return `{"images":["nginx"],"readiness":` + s + `}` }

const minReadyMessage = "minReadyNodes must be a number of nodes (0 or more) or a percentage from 0% to 100%"

var readinessCases = []badInputCase{
	{"negative minReadyNodes", readiness(`{"minReadyNodes":-1}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"minReadyNodes above 100%", readiness(`{"minReadyNodes":"101%"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"negative percentage", readiness(`{"minReadyNodes":"-5%"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"number as a string", readiness(`{"minReadyNodes":"90"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"fractional percentage", readiness(`{"minReadyNodes":"99.5%"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"space before the percent sign", readiness(`{"minReadyNodes":"90 %"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"word for a percentage", readiness(`{"minReadyNodes":"most"}`), []string{"spec.readiness.minReadyNodes", minReadyMessage}},
	{"readiness as a string", readiness(`"90%"`), []string{"spec.readiness", "object"}},
}

// rollout wraps spec.rollout in a spec with one good image.
func rollout(s string) string { return `{"images":["nginx"],"rollout":` + s + `}` }

const maxPullingMessage = "maxPulling must be a number of nodes (1 or more) or a percentage from 1% to 100%"

var rolloutCases = []badInputCase{
	{"maxPulling of 0", rollout(`{"maxPulling":0}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"negative maxPulling", rollout(`{"maxPulling":-3}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"maxPulling of 0%", rollout(`{"maxPulling":"0%"}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"maxPulling above 100%", rollout(`{"maxPulling":"150%"}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"maxPulling number as a string", rollout(`{"maxPulling":"10"}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"fractional maxPulling", rollout(`{"maxPulling":"2.5%"}`), []string{"spec.rollout.maxPulling", maxPullingMessage}},
	{"empty rollout", rollout(`{}`), []string{"spec.rollout", "rollout must set maxPulling, canary: true, or both"}},
	{"canary false alone", rollout(`{"canary":false}`), []string{"spec.rollout", "rollout must set maxPulling, canary: true, or both"}},
	{"canary as a string", rollout(`{"canary":"yes"}`), []string{"spec.rollout.canary", "boolean"}},
	{"rollout as a number", rollout(`10`), []string{"spec.rollout", "object"}},
}

// retentionCases are bad spec.retention values.
var retentionCases = []badInputCase{
	{"unknown retention", `{"images":["nginx"],"retention":"Forever"}`, []string{"spec.retention", "Unsupported value", "Pinned"}},
	{"lower-case retention", `{"images":["nginx"],"retention":"pinned"}`, []string{"spec.retention", "Unsupported value"}},
	{"empty retention", `{"images":["nginx"],"retention":""}`, []string{"spec.retention", "Unsupported value"}},
	{"retention as a boolean", `{"images":["nginx"],"retention":true}`, []string{"spec.retention", "string"}},
}

// TestAPIBadInput sends a real kube-apiserver (with the generated CRDs)
// specs an agent could not act on, and checks that each is refused with a
// message naming the field and the problem, so nothing of it reaches a node.
func TestAPIBadInput(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	groups := map[string][]badInputCase{"references": referenceCases, "selectors": selectorCases, "secrets and settings": secretAndOtherCases, "images from workloads": imagesFromCases,
		"artifacts": artifactCases,
		"readiness": readinessCases,
		"retention": retentionCases,
		"rollout":   rolloutCases}
	n := 0
	for group, cases := range groups {
		t.Run(group, func(t *testing.T) {
			for _, c := range cases {
				n++
				name := fmt.Sprintf("bad-%d", n)
				t.Run(c.name, func(t *testing.T) { expectInvalid(t, cp, name, c) })
			}
		})
	}
	if n < 60 {
		t.Fatalf("only %d bad-input cases", n)
	}
	t.Run("accepted edge cases", func(t *testing.T) { testAcceptedEdges(t, cp) })
	t.Run("the rules accept what the patterns did", func(t *testing.T) { testLanguages(t, cp) })
	t.Run("a namespace beside a secret name is dropped", func(t *testing.T) { testSecretNamespaceDropped(t, cp) })
}

func expectInvalid(t *testing.T, cp *testbed.ControlPlane, name string, c badInputCase) {
	t.Helper()
	err := cp.Client.Create(context.Background(), imageWarm(t, name, c.spec))
	if err == nil {
		t.Fatalf("accepted %.200s", c.spec)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	for _, w := range c.want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q:\n%.600v", w, err)
		}
	}
	if strings.Contains(err.Error(), rawPattern) {
		t.Errorf("the refusal quotes a pattern instead of saying what is wrong:\n%.600v", err)
	}
	t.Logf("refused with: %v", err)
}

// testAcceptedEdges checks what must pass: a tag with a digest (pulled by the
// digest), spellings the agent folds into one image, and the longest
// references the bounds allow.
func testAcceptedEdges(t *testing.T, cp *testbed.ControlPlane) {
	cases := []struct{ name, spec string }{
		{"tag plus digest", img("registry.example/app:v1@sha256:" + sha256Hex)},
		{"sha384 and sha512 digests", img("app@sha384:"+strings.Repeat("b", 96), "app@sha512:"+strings.Repeat("c", 128))},
		{"upper-case tag and registry host", img("Registry.Example:5000/app:V1.2-RC")},
		{"spellings of one image", img("nginx", "nginx:latest", "docker.io/library/nginx", "docker.io/library/nginx:latest")},
		{"repository of 255 characters", img("registry.example/" + strings.Repeat("a", 238) + ":v1")},
		{"reference of 512 characters", img("registry.example/" + strings.Repeat("a", 230) + ":" + strings.Repeat("t", 128) + "@sha512:" + strings.Repeat("c", 128))},
		{"tag of 128 characters", img("nginx:" + strings.Repeat("t", 128))},
		{"a dotted first component that is a path, not a host", img("my_team.example/app")},
		{"IPv6 registry with a port", img("[fe80::1]:5000/app:v1")},
		{"durations at their bounds", `{"images":["nginx"],"pullTimeout":"10s","pullPolicy":"Always","refreshInterval":"0.5h30m"}`},
		{"a pullTimeout of 24h in milliseconds", `{"images":["nginx"],"pullTimeout":"86400000ms"}`},
		{"label keys and values at their edges", sel(`{"matchLabels":{"example.com/Zone_1":""},"matchExpressions":[{"key":"a.b-c/x.y","operator":"In","values":["A","a-b_c.d"]}]}`)},
		{"minReadyNodes as a number", readiness(`{"minReadyNodes":3}`)},
		{"minReadyNodes of 0%", readiness(`{"minReadyNodes":"0%"}`)},
		{"minReadyNodes of 100%", readiness(`{"minReadyNodes":"100%"}`)},
		{"maxPulling of 1", rollout(`{"maxPulling":1}`)},
		{"maxPulling of 1% with a canary", rollout(`{"maxPulling":"1%","canary":true}`)},
		{"a canary alone", rollout(`{"canary":true}`)},
		{"maxPulling of 100%", rollout(`{"maxPulling":"100%"}`)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := cp.Client.Create(context.Background(), imageWarm(t, fmt.Sprintf("edge-%d", i), c.spec)); err != nil {
				t.Fatalf("rejected %.200s: %v", c.spec, err)
			}
		})
	}
}

// testSecretNamespaceDropped: a secret reference has no namespace field; one
// written anyway is pruned, so the agent can only look in the ImageWarm's
// own namespace.
func testSecretNamespaceDropped(t *testing.T, cp *testbed.ControlPlane) {
	ctx := context.Background()
	u := imageWarm(t, "secret-ns", secrets(`[{"name":"regcred","namespace":"kube-system"}]`))
	if err := cp.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
		t.Fatal(err)
	}
	refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "imagePullSecrets")
	if len(refs) != 1 || fmt.Sprint(refs[0]) != "map[name:regcred]" {
		t.Fatalf("stored imagePullSecrets %v, want only the name", refs)
	}
}
