package rollout

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// writes counts the API server's successful writes by "VERB
// resource[/subresource]", from its apiserver_request_total.
type writes map[string]float64

// apiWrites scrapes the API server's /metrics as the admin.
func apiWrites(t *testing.T) writes {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleet.CP.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scraping the API server: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the API server's metrics: %v", err)
	}
	out := writes{}
	f := families["apiserver_request_total"]
	if f == nil {
		t.Fatal("the API server exposes no apiserver_request_total")
	}
	for _, m := range f.GetMetric() {
		if key, ok := writeKey(m); ok {
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// settledWrites waits until the writes to events since before have not
// grown for three seconds (the agents record theirs a moment after their
// reports), and returns the writes since before.
func settledWrites(t *testing.T, before writes) writes {
	t.Helper()
	w, still := apiWrites(t).since(before), 0
	for deadline := time.Now().Add(30 * time.Second); still < 6 && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		next := apiWrites(t).since(before)
		if next.of("events") == w.of("events") {
			still++
		} else {
			still = 0
		}
		w = next
	}
	return w
}

// writeKey names a sample of a mutating verb answered with success.
func writeKey(m *dto.Metric) (string, bool) {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	switch l["verb"] {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY":
	default:
		return "", false
	}
	if !strings.HasPrefix(l["code"], "2") || l["dry_run"] != "" {
		return "", false
	}
	res := l["resource"]
	if l["subresource"] != "" {
		res += "/" + l["subresource"]
	}
	return l["verb"] + " " + res, true
}

// since is what was written between two scrapes.
func (w writes) since(before writes) writes {
	out := writes{}
	for k, v := range w {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// of sums the writes to the resources named (with their subresources).
func (w writes) of(resources ...string) float64 {
	var sum float64
	for k, v := range w {
		_, res, _ := strings.Cut(k, " ")
		res, _, _ = strings.Cut(res, "/")
		if slices.Contains(resources, res) {
			sum += v
		}
	}
	return sum
}

// String lists the writes to Pods and events, the ones a gate adds to.
func (w writes) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if _, res, _ := strings.Cut(k, " "); strings.HasPrefix(res, "pods") || res == "events" {
			fmt.Fprintf(&b, "%s %.0f; ", k, w[k])
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}
