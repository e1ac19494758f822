package v1alpha1_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/vocabulary"
	"github.com/warmer-dev/warmer/test/testbed"
)

// The largest objects the API admits, built from the generated CRDs (so
// from the Go types and their markers, not from a copy of the limits), and
// what they take as stored.

// widest is the character JSON writes in the most bytes (\u003c) among
// those a string without a pattern may hold.
const widest = "<"

// escaped are characters JSON writes in more than one byte; a pattern that
// admits none of them makes a string's stored size its length.
var escaped = []string{`"`, `\`, "<", ">", "&", "\x01", "\n", "é", "\u2028"}

// conditionMessageRule is the rule that caps condition messages below
// metav1.Condition's own 32768 characters.
func conditionMessageRule(limit int) string {
	return fmt.Sprintf("self.all(c, size(c.message) <= %d)", limit)
}

// conditionMessageLimit is the longest condition message a kind's CRD
// file takes.
func conditionMessageLimit(file string) int {
	if strings.Contains(file, "nodewarms") {
		return warmv1.MaxNodeConditionMessageLength
	}
	return warmv1.MaxConditionMessageLength
}

// maximizer builds the largest value of a schema.
type maximizer struct {
	t testing.TB
	// patterns are the patterns met, compiled and checked once.
	patterns map[string]*regexp.Regexp
	// conditionMessage is the longest condition message the kind takes.
	conditionMessage int
}

// crdSchema reads the openAPIV3Schema of one of the generated CRDs.
func crdSchema(t testing.TB, file string) *apiextv1.JSONSchemaProps {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// maxStatus is the largest status a kind's schema admits, as it would be
// sent and stored.
func maxStatus(t testing.TB, file string) map[string]any {
	t.Helper()
	m := &maximizer{t: t, patterns: map[string]*regexp.Regexp{}, conditionMessage: conditionMessageLimit(file)}
	return m.value(crdSchema(t, file).Properties["status"], "status", 0).(map[string]any)
}

// value is the largest value of s at path; salt tells list items apart,
// so that keys of map-type lists stay unique.
func (m *maximizer) value(s apiextv1.JSONSchemaProps, path string, salt int) any {
	switch s.Type {
	case "object":
		return m.object(s, path, salt)
	case "array":
		if s.MaxItems == nil {
			m.t.Fatalf("%s: a list without maxItems has no largest size", path)
		}
		items := make([]any, *s.MaxItems)
		for i := range items {
			items[i] = m.value(*s.Items.Schema, path+"[]", i)
		}
		return items
	case "string":
		return m.str(s, path, salt)
	case "integer":
		return longestInteger(s)
	case "boolean":
		return false
	}
	m.t.Fatalf("%s: type %q not handled", path, s.Type)
	return nil
}

func (m *maximizer) object(s apiextv1.JSONSchemaProps, path string, salt int) map[string]any {
	if s.AdditionalProperties != nil {
		m.t.Fatalf("%s: maps are not handled", path)
	}
	out := make(map[string]any, len(s.Properties))
	for name, p := range s.Properties {
		out[name] = m.value(p, path+"."+name, salt)
	}
	return out
}

// str is the longest string s admits at path, in its widest characters:
// "<" where there is no pattern, else letters, which every pattern here
// admits, after checking that the pattern admits nothing JSON escapes.
func (m *maximizer) str(s apiextv1.JSONSchemaProps, path string, salt int) string {
	switch {
	case len(s.Enum) > 0:
		longest := ""
		for _, e := range s.Enum {
			var v string
			if err := json.Unmarshal(e.Raw, &v); err != nil {
				m.t.Fatal(err)
			}
			if len(v) > len(longest) {
				longest = v
			}
		}
		return longest
	case s.Format == "date-time":
		return "2026-11-23T08:46:21Z" // metav1.Time: always 20 characters
	case s.Format == "byte":
		return longestBytes(m.t, s, path)
	case s.MaxLength == nil:
		m.t.Fatalf("%s: a string without maxLength has no largest size", path)
	}
	n := int(*s.MaxLength)
	if strings.HasSuffix(path, "conditions[].message") {
		n = m.conditionMessage // checked to be enforced in TestWorstCaseSizes
	}
	if s.Pattern == "" {
		return strings.Repeat(widest, n)
	}
	re := m.patterns[s.Pattern]
	if re == nil {
		re = regexp.MustCompile(s.Pattern)
		m.patterns[s.Pattern] = re
	}
	return patterned(m.t, path, re, n, salt)
}

// patterned is a string of n characters that matches pattern, made of
// letters with salt written into its end in letters or digits; the digest
// pattern gets a sha512 digest. It fails when the pattern admits a
// character JSON escapes, as the byte count would then be wrong.
func patterned(t testing.TB, path string, re *regexp.Regexp, n, salt int) string {
	v := salted(n, salt, 'a', 26)
	if !re.Match(v) {
		v = salted(n, salt, '0', 10)
	}
	if !re.Match(v) {
		v = []byte("sha512:" + strings.Repeat("f", 128))
		if len(v) != n || !re.Match(v) {
			t.Fatalf("%s: no maximal value known for pattern %s", path, re)
		}
	}
	if salt == 0 { // once per list is enough
		for _, c := range escaped {
			if re.MatchString(string(v[:len(v)-1]) + c) {
				t.Fatalf("%s: pattern %s admits %q, which JSON writes in more than one byte", path, re, c)
			}
		}
	}
	return string(v)
}

// salted is n letters a with salt written into the end in base digits
// from zero.
func salted(n, salt int, zero byte, base int) []byte {
	v := []byte(strings.Repeat("a", n))
	for i := len(v) - 1; salt > 0 && i >= 0; i, salt = i-1, salt/base {
		v[i] = zero + byte(salt%base)
	}
	return v
}

// longestBytes is the longest base64 a bytes field admits: as many bytes
// as fit in maxLength and match its pattern, if it has one.
func longestBytes(t testing.TB, s apiextv1.JSONSchemaProps, path string) string {
	if s.MaxLength == nil {
		t.Fatalf("%s: bytes without maxLength have no largest size", path)
	}
	for n := int(*s.MaxLength) / 4 * 3; n > 0; n-- {
		v := base64.StdEncoding.EncodeToString(make([]byte, n))
		if len(v) <= int(*s.MaxLength) && (s.Pattern == "" || regexp.MustCompile(s.Pattern).MatchString(v)) {
			return v
		}
	}
	t.Fatalf("%s: no bytes fit", path)
	return ""
}

// longestInteger is the integer s admits that takes the most digits.
func longestInteger(s apiextv1.JSONSchemaProps) int64 {
	if len(s.Enum) > 0 {
		var longest int64
		for _, e := range s.Enum {
			var v int64
			if err := json.Unmarshal(e.Raw, &v); err == nil && len(fmt.Sprint(v)) >= len(fmt.Sprint(longest)) {
				longest = v
			}
		}
		return longest
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if s.Format == "int32" {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	if s.Minimum != nil {
		lo = int64(*s.Minimum)
	}
	if s.Maximum != nil {
		hi = int64(*s.Maximum)
	}
	if len(fmt.Sprint(lo)) > len(fmt.Sprint(hi)) {
		return lo
	}
	return hi
}

// storedSize is what v takes as the API server stores it: JSON, as
// encoding/json writes it (the API server's own encoder for custom
// resources), HTML characters escaped.
func storedSize(t testing.TB, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestWorstCaseSizes checks the arithmetic of limits.go: the largest status
// of either kind stays under StatusBudget, which leaves etcd's limit room
// for metadata, and the rules the arithmetic counts on are in the CRDs.
func TestWorstCaseSizes(t *testing.T) {
	if warmv1.StatusBudget+256<<10+64<<10 > warmv1.EtcdRequestLimit || warmv1.EtcdRequestLimit > warmv1.APIServerBodyLimit {
		t.Fatalf("budget %d + 320 KiB of metadata is over etcd's %d, or etcd's is over the body limit %d",
			warmv1.StatusBudget, warmv1.EtcdRequestLimit, warmv1.APIServerBodyLimit)
	}
	for _, kind := range []struct{ file, name string }{
		{"warmer.dev_nodewarms.yaml", "NodeWarm"},
		{"warmer.dev_imagewarms.yaml", "ImageWarm"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			conds := crdSchema(t, kind.file).Properties["status"].Properties["conditions"]
			rule := conditionMessageRule(conditionMessageLimit(kind.file))
			if len(conds.XValidations) == 0 || conds.XValidations[0].Rule != rule {
				t.Fatalf("status.conditions lacks the rule %q the arithmetic counts on: %+v", rule, conds.XValidations)
			}
			st := maxStatus(t, kind.file)
			size := storedSize(t, st)
			t.Logf("largest %s status: %d bytes (%.2f MiB), %.0f%% of the budget", kind.name, size, float64(size)/(1<<20), 100*float64(size)/warmv1.StatusBudget)
			if size > warmv1.StatusBudget {
				t.Errorf("the largest %s status takes %d bytes, over the %d budget", kind.name, size, warmv1.StatusBudget)
			}
			if imgs, ok := st["images"].([]any); ok && len(imgs) > 0 {
				t.Logf("largest image entry: %d bytes; %d entries", storedSize(t, imgs[0]), len(imgs))
			}
		})
	}
}

// testNodeWarmMaximum writes the largest NodeWarm status the schema admits
// to a real API server, with etcd's default request limit behind it: it is
// taken. One image more is refused by validation, saying why, before the
// request could reach etcd.
func testNodeWarmMaximum(t *testing.T, cp *testbed.ControlPlane) {
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(warmv1.GroupVersion.String())
	u.SetKind("NodeWarm")
	u.SetName(strings.Repeat("n", 250) + ".io") // a node name at its longest
	if err := cp.Client.Create(ctx, u); err != nil {
		t.Fatalf("creating a NodeWarm: %v", err)
	}
	st := maxStatus(t, "warmer.dev_nodewarms.yaml")
	u.Object["status"] = st
	if err := cp.Client.Status().Update(ctx, u); err != nil {
		t.Fatalf("the largest valid status (%d bytes) was refused: %v", storedSize(t, st), err)
	}
	var got warmv1.NodeWarm
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(u), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Images) != warmv1.MaxNodeImages || len(got.Status.Warms) != warmv1.MaxNodeWarms {
		t.Fatalf("stored %d images and %d warms, want %d and %d", len(got.Status.Images), len(got.Status.Warms), warmv1.MaxNodeImages, warmv1.MaxNodeWarms)
	}
	t.Logf("stored a NodeWarm of %d bytes", storedSize(t, u.Object))

	imgs := st["images"].([]any)
	st["images"] = append(imgs, imgs[0])
	u.Object["status"] = st // the update took the server's copy
	err := cp.Client.Status().Update(ctx, u)
	want := fmt.Sprintf("status.images: Too many: %d: must have at most %d items", warmv1.MaxNodeImages+1, warmv1.MaxNodeImages)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("one image over the limit: got %v, want a validation error saying %q", err, want)
	}
	for _, c := range nodeWarmBadInput {
		t.Run(c.name, func(t *testing.T) {
			bad := maxStatus(t, "warmer.dev_nodewarms.yaml")
			c.spoil(bad)
			u.Object["status"] = bad
			err := cp.Client.Status().Update(ctx, u)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a validation error saying %q", err, c.want)
			}
		})
	}
}

// nodeWarmBadInput are NodeWarm statuses the size arithmetic counts on the
// API server to refuse, each spoiling the largest valid status.
var nodeWarmBadInput = []struct {
	name  string
	spoil func(st map[string]any)
	want  string
}{
	{"a quote in a message", func(st map[string]any) { firstImage(st)["message"] = `say "no"` }, "status.images[0].message: Invalid value"},
	{"a line break in a message", func(st map[string]any) { firstImage(st)["message"] = "a\nb" }, "status.images[0].message: Invalid value"},
	{"non-ASCII in a message", func(st map[string]any) { firstImage(st)["message"] = "é" }, "status.images[0].message: Invalid value"},
	{"< in an image", func(st map[string]any) { firstImage(st)["image"] = "a<b" }, "status.images[0].image: Invalid value"},
	{"a short digest", func(st map[string]any) { firstImage(st)["digest"] = "sha256:abc" }, "status.images[0].digest: Invalid value"},
	{"a message over 256", func(st map[string]any) {
		firstImage(st)["message"] = strings.Repeat("m", warmv1.MaxNodeMessageLength+1)
	}, "status.images[0].message: Too long"},
	{"an index past the warms", func(st map[string]any) { firstImage(st)["warms"] = []any{warmv1.MaxNodeWarms} }, "status.images[0].warms[0]: Invalid value"},
	{"17 requesters", func(st map[string]any) { firstImage(st)["warms"] = slices.Repeat([]any{0}, warmv1.MaxRequestedBy+1) }, "status.images[0].warms: Too many"},
	{"513 warms", func(st map[string]any) { st["warms"] = append(st["warms"].([]any), st["warms"].([]any)[0]) }, "status.warms: Too many"},
	{"a condition message over 768", func(st map[string]any) {
		st["conditions"].([]any)[0].(map[string]any)["message"] = strings.Repeat("m", warmv1.MaxNodeConditionMessageLength+1)
	}, "condition messages must be at most 768 characters"},
	{"a served count over 999999", func(st map[string]any) {
		st["warms"].([]any)[0].(map[string]any)["servedStarts"] = 1_000_000
	}, "status.warms[0].servedStarts: Invalid value"},
}

func firstImage(st map[string]any) map[string]any { return st["images"].([]any)[0].(map[string]any) }

// TestReasonsFitTheirField holds every reason conditions.go names within
// the bound the NodeWarm's image entries take: the arithmetic above counts
// on it, and an agent writes any of them there (pull failure classes,
// evictions, the disk guard's).
func TestReasonsFitTheirField(t *testing.T) {
	field := crdSchema(t, "warmer.dev_nodewarms.yaml").Properties["status"].Properties["images"].Items.Schema.Properties["reason"]
	if field.MaxLength == nil {
		t.Fatal("status.images[].reason has no maxLength")
	}
	groups, err := vocabulary.Parse("conditions.go", warmv1.ConditionsSource)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups {
		for _, c := range g.Consts {
			if !strings.HasPrefix(c.Ident, "Reason") {
				continue
			}
			n++
			if int64(len(c.Value)) > *field.MaxLength {
				t.Errorf("%s is %q, %d characters: over the %d an image entry's reason takes", c.Ident, c.Value, len(c.Value), *field.MaxLength)
			}
		}
	}
	if n < 20 {
		t.Fatalf("read %d reasons from conditions.go; the parse lost them", n)
	}
}
