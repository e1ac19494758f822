package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/warmer-dev/warmer/test/testbed"
)

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// expand replaces the dashboard's variables with what Grafana would send
// for the default selection.
var expand = strings.NewReplacer(
	"$agent_job", "warmer-agent",
	"$controller_job", "warmer-controller",
	"$node", ".*",
	"$__rate_interval", "1m",
)

var metricName = regexp.MustCompile(`\b(warmer_[a-z_]+|process_[a-z_]+)\b`)

// checkDashboard evaluates every panel query, with the variables filled
// in, on a Prometheus that scraped a warm, and checks that each metric the
// dashboard names is one the processes export.
func checkDashboard(t *testing.T, prom *testbed.Prometheus) {
	raw, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "config", "grafana", "warmer-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	exported := map[string]bool{}
	vec, err := prom.Query(t, `count by (__name__) ({__name__=~"warmer_.+|process_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range vec {
		exported[string(s.Metric["__name__"])] = true
	}
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			expr := expand.Replace(tg.Expr)
			if _, err := prom.Query(t, expr); err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
			}
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				if !exported[m] && !exported[m+"_bucket"] && !exported[strings.TrimSuffix(m, "_bucket")+"_bucket"] {
					t.Errorf("panel %q uses %s, which no warmer process exports", p.Title, m)
				}
			}
		}
	}
	if queries < 15 {
		t.Errorf("the dashboard has %d queries; expected the full set", queries)
	}
	for _, v := range d.Templating.List {
		if v.Definition == "" {
			continue
		}
		q := strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ", node)")
		vec, err := prom.Query(t, expand.Replace(q))
		if err != nil || len(vec) == 0 {
			t.Errorf("variable %s: %q found no series (%v)", v.Name, q, err)
		}
	}
}

// checkRules checks that Prometheus loaded every rule of
// config/prometheus/rules.yaml and evaluated each without error. The
// NotFound failure the test caused is under the failing-nodes alert's 30
// minutes, so that alert must be pending, not absent.
func checkRules(t *testing.T, prom *testbed.Prometheus) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testbed.Eventually(t, 20*time.Second, "rules evaluated", func() error {
		rules, err := prom.API.Rules(ctx, nil)
		if err != nil {
			return err
		}
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				a, ok := r.(promv1.AlertingRule)
				if !ok {
					continue
				}
				n++
				if a.Health != promv1.RuleHealthGood {
					return fmt.Errorf("rule %s: health %s: %s", a.Name, a.Health, a.LastError)
				}
				if a.Name == "WarmerImageWarmFailing" && a.State != "pending" {
					return fmt.Errorf("WarmerImageWarmFailing is %q, want pending after a NotFound", a.State)
				}
			}
		}
		if n != 4 {
			return fmt.Errorf("%d alerting rules loaded, want 4", n)
		}
		return nil
	})
}
