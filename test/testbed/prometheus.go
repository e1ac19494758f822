package testbed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus is a prometheus server process (Debian's package) on
// loopback, with its TSDB in a temp dir.
type Prometheus struct {
	// URL is the server's base URL.
	URL string
	// API is a client of its HTTP API.
	API  promv1.API
	proc *process
}

// StartPrometheus starts prometheus with config (a whole prometheus.yml)
// on a free loopback port, waits until it is ready and stops it at cleanup.
func StartPrometheus(t TB, config string) *Prometheus {
	t.Helper()
	bin, err := lookPath("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := shortDir(t, "prom")
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p, err := startProcess("prometheus", filepath.Join(dir, "prometheus.log"), nil, bin,
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(10 * time.Second) })
	pr := &Prometheus{URL: "http://" + addr, proc: p}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitFor(ctx, p, "ready on /-/ready", pr.ready); err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient(api.Config{Address: pr.URL})
	if err != nil {
		t.Fatal(err)
	}
	pr.API = promv1.NewAPI(c)
	return pr
}

func (p *Prometheus) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready: %s", resp.Status)
	}
	return nil
}

// Query evaluates an instant PromQL query now and returns its vector; a
// query that does not evaluate to a vector fails the test.
func (p *Prometheus) Query(t TB, expr string) (model.Vector, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, _, err := p.API.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		t.Fatalf("query %q gave a %s, not a vector", expr, v.Type())
	}
	return vec, nil
}

// Log returns the last lines of the server's log.
func (p *Prometheus) Log(lines int) string { return p.proc.tail(lines) }
