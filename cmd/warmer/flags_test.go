package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubeconfigNotThrottled checks that a --kubeconfig config has no
// client-side rate limit, as the in-cluster one from ctrl.GetConfig has:
// client-go's default of 5 requests a second made the controller take
// minutes to catch up with hundreds of ImageWarms.
func TestKubeconfigNotThrottled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	c := commonFlags{kubeconfig: path}
	cfg, err := c.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Errorf("QPS %v, rate limiter %v: want client-side limiting off (QPS < 0)", cfg.QPS, cfg.RateLimiter)
	}
}
