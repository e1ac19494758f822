package security

import (
	"net/http"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// TestMetricsAuthentication scrapes the controller's /metrics, which names
// every ImageWarm, as shipped: over HTTPS, an anonymous request and a
// token the API server knows but RBAC does not let get /metrics are
// refused, a token bound to warmer-metrics-reader is served, and plain
// HTTP is not spoken. The agents' /metrics stay plain, as docs/security.md
// decides.
func TestMetricsAuthentication(t *testing.T) {
	f := testbed.StartFleet(t, map[string]map[string]string{node: nil}, testbed.FleetOptions{})
	addr := f.ControllerMetrics
	if f.ControllerMetricsScheme != "https" {
		t.Fatalf("the controller serves /metrics over %s, want https", f.ControllerMetricsScheme)
	}
	const forged = "forged-scraper-token"
	for _, c := range []struct {
		what, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		// controller-runtime answers a TokenReview's error (the API server
		// does not know the token) with 500, not 401: refused all the same.
		{"a token the API server does not know", forged, http.StatusInternalServerError},
		{"a token without the reader role", f.CP.ScraperToken(t, false), http.StatusForbidden},
		{"a token with the reader role", f.CP.ScraperToken(t, true), http.StatusOK},
	} {
		status, body, err := testbed.GetMetrics("https", addr, c.token)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if status != c.want {
			t.Errorf("%s: status %d, want %d", c.what, status, c.want)
		}
		if served := strings.Contains(body, "go_goroutines"); served != (c.want == http.StatusOK) {
			t.Errorf("%s: metrics served: %v, want %v; body starts %.200q", c.what, served, !served, body)
		}
	}
	if strings.Contains(readFile(t, f.Controller.LogPath()), forged) {
		t.Error("the controller logged a scraper's token")
	}
	if status, _, err := testbed.GetMetrics("http", addr, ""); err == nil && status == http.StatusOK {
		t.Error("the controller's /metrics answers plain HTTP")
	}
	status, body, err := testbed.GetMetrics("http", f.Nodes[node].Metrics, "")
	if err != nil || status != http.StatusOK || !strings.Contains(body, "warmer_") {
		t.Errorf("the agent's plain /metrics: status %d, err %v", status, err)
	}
}
