package v1alpha1_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warmer-dev/warmer/test/testbed"
)

// The languages the spec's strings were held to by OpenAPI patterns before
// CEL rules with messages replaced them. The rules must accept exactly
// these: a refusal got words, nothing else changed.
var (
	oldReference = regexp.MustCompile(`^(?:(?:(?:localhost|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+|\[[a-fA-F0-9:]+\])(?::[0-9]+)?|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]):[0-9]+)/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$`)
	// oldRepositoryLength is the rule kept from before: 255 characters of
	// repository name.
	oldRepositoryLength = regexp.MustCompile(`^[^@]{1,255}(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?(@.+)?$`)
	oldLabelKey         = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	oldLabelValue       = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	oldSecretName       = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	oldDuration         = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
)

// language is one kind of string the spec takes: how the old patterns
// judged it, strings to mutate into candidates, and how to send a batch
// of candidates in one ImageWarm spec.
type language struct {
	name     string
	accepted func(string) bool
	seeds    []string
	alphabet string
	// batch is how many candidates one spec holds; spec builds it and
	// index turns a refused field path into the candidate's index.
	batch int
	spec  func([]string) string
	index func(field string) (int, bool)
}

// indexIn reads the candidate index from a field path such as
// spec.images[7] (below prefix).
func indexIn(prefix string) func(string) (int, bool) {
	return func(field string) (int, bool) {
		rest, ok := strings.CutPrefix(field, prefix+"[")
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		return n, err == nil
	}
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func jsonList(vs []string) string {
	b, err := json.Marshal(vs)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var languages = []language{
	{
		name: "image references",
		accepted: func(s string) bool {
			return len(s) >= 1 && len(s) <= 512 && oldReference.MatchString(s) && oldRepositoryLength.MatchString(s)
		},
		seeds: []string{"nginx", "nginx:1.27", "registry.example:5000/team/app:v1@sha256:" + sha256Hex, "localhost/app",
			"localhost:5000/a/b", "[::1]:5000/app:V1", "Registry.Example/app", "a_b.c/app", "a.b/c__d--e/f",
			"app@sha512:" + strings.Repeat("c", 128), "x:5000/y", "a-b.c-d/e.f_g:_t", "[fe80::1]/x",
			"h.io/a/b/c:" + strings.Repeat("T", 127), "x.y:1/a@sha384:" + strings.Repeat("b", 96)},
		alphabet: "abcAZ09._-:/@[]:/@ é\n",
		batch:    100,
		spec:     func(vs []string) string { return `{"images":` + jsonList(vs) + `}` },
		index:    indexIn("spec.images"),
	},
	{
		name:     "label keys",
		accepted: func(s string) bool { return len(s) >= 1 && len(s) <= 317 && oldLabelKey.MatchString(s) },
		seeds:    []string{"zone", "example.com/zone", "a.b-c.d/Z_o.n-e", "k8s.io/" + strings.Repeat("n", 62), "x/y"},
		alphabet: "aZ0._-/ é",
		batch:    16,
		spec: func(vs []string) string {
			exprs := make([]string, len(vs))
			for i, v := range vs {
				exprs[i] = fmt.Sprintf(`{"key":%s,"operator":"Exists"}`, jsonString(v))
			}
			return sel(`{"matchExpressions":[` + strings.Join(exprs, ",") + `]}`)
		},
		index: func(field string) (int, bool) {
			return indexIn("spec.nodeSelector.matchExpressions")(strings.TrimSuffix(field, ".key"))
		},
	},
	{
		name:     "label values",
		accepted: func(s string) bool { return len(s) <= 63 && oldLabelValue.MatchString(s) },
		seeds:    []string{"", "a", "a-b_c.d", "Zone9", strings.Repeat("v", 63)},
		alphabet: "aZ0._- é",
		batch:    64,
		spec: func(vs []string) string {
			return sel(`{"matchExpressions":[{"key":"k","operator":"In","values":` + jsonList(vs) + `}]}`)
		},
		index: indexIn("spec.nodeSelector.matchExpressions[0].values"),
	},
	{
		name:     "secret names",
		accepted: func(s string) bool { return len(s) >= 1 && len(s) <= 253 && oldSecretName.MatchString(s) },
		seeds:    []string{"regcred", "a.b-c", "ns/regcred", "x"},
		alphabet: "aZ0.-_/ ",
		batch:    8,
		spec: func(vs []string) string {
			refs := make([]string, len(vs))
			for i, v := range vs {
				refs[i] = `{"name":` + jsonString(v) + `}`
			}
			return secrets("[" + strings.Join(refs, ",") + "]")
		},
		index: func(field string) (int, bool) {
			return indexIn("spec.imagePullSecrets")(strings.TrimSuffix(field, ".name"))
		},
	},
	{
		name: "refresh intervals",
		accepted: func(s string) bool {
			d, err := time.ParseDuration(s)
			return oldDuration.MatchString(s) && err == nil && d >= time.Minute
		},
		seeds:    []string{"1m", "1h30m", "0.5h", "60s", "60000ms", "2562047h", "2562048h", "9223372036854775807ns"},
		alphabet: "019.hmsunµ -+",
		batch:    1,
		spec: func(vs []string) string {
			return `{"images":["nginx"],"pullPolicy":"Always","refreshInterval":` + jsonString(vs[0]) + `}`
		},
		index: func(field string) (int, bool) { return 0, field == "spec.refreshInterval" },
	},
	{
		name: "pull timeouts",
		accepted: func(s string) bool {
			d, err := time.ParseDuration(s)
			return oldDuration.MatchString(s) && err == nil && d >= 10*time.Second && d <= 24*time.Hour
		},
		seeds: []string{"10s", "1h30m", "0.5h", "90s", "24h", "1500ms", "2µs", "100us", "10000ms", "1440m", "86400s",
			"99999999999h", "86400000000000ns", "23h59m60s"},
		alphabet: "019.hmsunµ -+",
		batch:    1,
		spec:     func(vs []string) string { return `{"images":["nginx"],"pullTimeout":` + jsonString(vs[0]) + `}` },
		index: func(field string) (int, bool) {
			return 0, field == "spec.pullTimeout"
		},
	},
}

// testLanguages sends a real API server thousands of strings,
// mutations of valid ones, and checks that it refuses exactly those the
// old patterns refused: the CEL rules changed the words, not the language.
func testLanguages(t *testing.T, cp *testbed.ControlPlane) {
	r := rand.New(rand.NewPCG(31, 6))
	for _, l := range languages {
		t.Run(l.name, func(t *testing.T) {
			n := 3000
			if l.batch < 16 {
				n = 300 // one request per few candidates
			}
			cands := candidates(r, l, n)
			refused := 0
			for start := 0; start < len(cands); start += l.batch {
				batch := cands[start:min(start+l.batch, len(cands))]
				got := refusedIn(t, cp, l, batch)
				for i, s := range batch {
					if got[i] == l.accepted(s) {
						t.Errorf("%q: refused %v, the old pattern refused %v", s, got[i], !l.accepted(s))
					}
					if got[i] {
						refused++
					}
				}
			}
			t.Logf("%d candidates, %d refused", len(cands), refused)
			if refused == 0 || refused == len(cands) {
				t.Fatalf("%d of %d refused: the candidates do not test both sides", refused, len(cands))
			}
		})
	}
}

// candidates are n distinct mutations of l's seeds (one to three
// insertions, deletions or replacements of characters of its alphabet).
func candidates(r *rand.Rand, l language, n int) []string {
	alphabet := []rune(l.alphabet)
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		s := []rune(l.seeds[r.IntN(len(l.seeds))])
		for range 1 + r.IntN(3) {
			at := r.IntN(len(s) + 1)
			c := alphabet[r.IntN(len(alphabet))]
			switch op := r.IntN(3); {
			case op == 0:
				s = slices.Insert(s, at, c)
			case op == 1 && at < len(s):
				s = slices.Delete(s, at, at+1)
			case at < len(s):
				s[at] = c
			}
		}
		if v := string(s); !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// refusedIn sends one spec with the batch, dry run, and says which of its
// candidates the API server refused. A string over its maxLength stops the
// API server from checking the rules of the whole object (their cost is
// estimated from the bounds), so such a batch is sent again one by one.
func refusedIn(t *testing.T, cp *testbed.ControlPlane, l language, batch []string) []bool {
	t.Helper()
	got := make([]bool, len(batch))
	err := cp.Client.Create(context.Background(), imageWarm(t, "language", l.spec(batch)), client.DryRunAll)
	if err == nil {
		return got
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		i, ok := l.index(c.Field)
		switch {
		case !ok && strings.Contains(c.Message, rulesNotChecked) && len(batch) > 1:
			for i := range batch {
				got[i] = refusedIn(t, cp, l, batch[i:i+1])[0]
			}
			return got
		case !ok && strings.Contains(c.Message, rulesNotChecked):
			got[0] = true
		case !ok || i >= len(batch):
			t.Fatalf("a refusal of no one candidate: %s: %s", c.Field, c.Message)
		default:
			if strings.Contains(c.Message, rawPattern) {
				t.Errorf("%q refused with a pattern: %s", batch[i], c.Message)
			}
			got[i] = true
		}
	}
	return got
}

// rulesNotChecked is how the API server says it skipped the CEL rules of
// an object that broke a bound.
const rulesNotChecked = "some validation rules were not checked"
