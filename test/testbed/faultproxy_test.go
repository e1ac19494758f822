package testbed

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultProxy checks each mode against a stand-in upstream: the proxy is
// a test tool, and what it must do is fully visible over HTTP.
func TestFaultProxy(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Host", r.Host)
		_, _ = w.Write(body)
	}))
	defer upstream.Close()
	p := StartFaultProxy(t, strings.TrimPrefix(upstream.URL, "http://"))
	// No keep-alive: a reset connection must not be picked from the pool.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	get := func(path string) (*http.Response, []byte, error) {
		resp, err := c.Get("http://" + p.Host + path)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}

	t.Run("pass", func(t *testing.T) {
		resp, b, err := get("/v2/a/blobs/sha256:1")
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) {
			t.Fatalf("status %v, %d bytes, %v", resp, len(b), err)
		}
		if got := resp.Header.Get("X-Host"); got != p.Host {
			t.Errorf("upstream saw Host %q, want the proxy's %q", got, p.Host)
		}
	})
	t.Run("500", func(t *testing.T) {
		p.Set(Fault{Mode: Fault500})
		resp, _, err := get("/v2/a/manifests/v1")
		if err != nil || resp.StatusCode != 500 {
			t.Fatalf("got %v, %v", resp, err)
		}
	})
	t.Run("429 with Retry-After", func(t *testing.T) {
		p.Set(Fault{Mode: Fault429, RetryAfter: 7 * time.Second})
		resp, b, err := get("/v2/a/manifests/v1")
		if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(b), "TOOMANYREQUESTS") {
			t.Fatalf("got %v %q, %v", resp, b, err)
		}
	})
	t.Run("scope", func(t *testing.T) {
		p.Set(Fault{Mode: Fault500, Paths: BlobPaths})
		if resp, _, err := get("/v2/a/manifests/v1"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("manifest under a blob fault: %v, %v", resp, err)
		}
		if resp, _, err := get("/v2/a/blobs/sha256:1"); err != nil || resp.StatusCode != 500 {
			t.Fatalf("blob under a blob fault: %v, %v", resp, err)
		}
	})
	t.Run("reset before the response", func(t *testing.T) {
		p.Set(Fault{Mode: FaultReset})
		_, _, err := get("/v2/a/manifests/v1")
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("want connection reset, got %v", err)
		}
	})
	t.Run("reset mid-body", func(t *testing.T) {
		p.Set(Fault{Mode: FaultReset, ResetAfter: 1000})
		resp, b, err := get("/v2/a/blobs/sha256:1")
		if err == nil || resp == nil || resp.StatusCode != 200 || len(b) >= len(body) {
			t.Fatalf("want a 200 cut short, got %v, %d bytes, %v", resp, len(b), err)
		}
	})
	t.Run("slow", func(t *testing.T) {
		p.Set(Fault{Mode: FaultSlow, Rate: 64 << 10})
		start := time.Now()
		_, b, err := get("/v2/a/blobs/sha256:1")
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
		// 64 KiB at 64 KiB/s: about a second; a generous floor.
		if d := time.Since(start); d < 700*time.Millisecond {
			t.Errorf("slow body took only %v", d)
		}
	})
	p.Pass()
	want := map[FaultMode]int{FaultPass: 2, Fault500: 2, Fault429: 1, FaultReset: 2, FaultSlow: 1}
	for m, n := range want {
		if got := p.Count(m); got != n {
			t.Errorf("%v: counted %d requests, want %d", m, got, n)
		}
	}
	if got := len(p.Requests()); got != 8 {
		t.Errorf("logged %d requests, want 8", got)
	}
}
