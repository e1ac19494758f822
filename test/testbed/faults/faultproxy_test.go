package faults

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

// The proxy is a test tool, and what it must do is fully visible over HTTP:
// these tests put it in front of a stand-in upstream, not a registry.

var proxyBody = bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB

type proxyFixture struct {
	p *FaultProxy
	c *http.Client
}

func startProxyFixture(t *testing.T) *proxyFixture {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Host", r.Host)
		_, _ = w.Write(proxyBody)
	}))
	t.Cleanup(upstream.Close)
	// No keep-alive: a reset connection must not be picked from the pool.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	return &proxyFixture{p: StartFaultProxy(t, strings.TrimPrefix(upstream.URL, "http://")), c: c}
}

func (f *proxyFixture) get(path string) (*http.Response, []byte, error) {
	resp, err := f.c.Get("http://" + f.p.Host + path)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestFaultProxyPassesThrough(t *testing.T) {
	f := startProxyFixture(t)
	resp, b, err := f.get("/v2/a/blobs/sha256:1")
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, proxyBody) {
		t.Fatalf("status %v, %d bytes, %v", resp, len(b), err)
	}
	if got := resp.Header.Get("X-Host"); got != f.p.Host {
		t.Errorf("upstream saw Host %q, want the proxy's %q", got, f.p.Host)
	}
	if f.p.Count(FaultPass) != 1 || len(f.p.Requests()) != 1 {
		t.Errorf("requests %+v", f.p.Requests())
	}
}

func TestFaultProxyErrors(t *testing.T) {
	f := startProxyFixture(t)
	f.p.Set(Fault{Mode: Fault500})
	if resp, _, err := f.get("/v2/a/manifests/v1"); err != nil || resp.StatusCode != 500 {
		t.Fatalf("500 mode: %v, %v", resp, err)
	}
	f.p.Set(Fault{Mode: Fault429, RetryAfter: 7 * time.Second})
	resp, b, err := f.get("/v2/a/manifests/v1")
	if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(b), "TOOMANYREQUESTS") {
		t.Fatalf("429 mode: %v %q, %v", resp, b, err)
	}
	f.p.Set(Fault{Mode: Fault500, Paths: BlobPaths})
	if resp, _, err := f.get("/v2/a/manifests/v1"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("manifest under a blob fault: %v, %v", resp, err)
	}
	if resp, _, err := f.get("/v2/a/blobs/sha256:1"); err != nil || resp.StatusCode != 500 {
		t.Fatalf("blob under a blob fault: %v, %v", resp, err)
	}
	if f.p.Count(Fault500) != 2 || f.p.Count(Fault429) != 1 || f.p.Count(FaultPass) != 1 {
		t.Errorf("requests %+v", f.p.Requests())
	}
}

func TestFaultProxyResets(t *testing.T) {
	f := startProxyFixture(t)
	f.p.Set(Fault{Mode: FaultReset})
	if _, _, err := f.get("/v2/a/manifests/v1"); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset before the response: want connection reset, got %v", err)
	}
	f.p.Set(Fault{Mode: FaultReset, ResetAfter: 1000})
	resp, b, err := f.get("/v2/a/blobs/sha256:1")
	if err == nil || resp == nil || resp.StatusCode != 200 || len(b) >= len(proxyBody) {
		t.Fatalf("reset mid-body: want a 200 cut short, got %v, %d bytes, %v", resp, len(b), err)
	}
	if f.p.Count(FaultReset) != 2 {
		t.Errorf("requests %+v", f.p.Requests())
	}
}

func TestFaultProxySlowBody(t *testing.T) {
	f := startProxyFixture(t)
	f.p.Set(Fault{Mode: FaultSlow, Rate: 64 << 10})
	start := time.Now()
	_, b, err := f.get("/v2/a/blobs/sha256:1")
	if err != nil || !bytes.Equal(b, proxyBody) {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	// 64 KiB at 64 KiB/s: about a second; a generous floor.
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("slow body took only %v", d)
	}
	if f.p.Count(FaultSlow) != 1 {
		t.Errorf("requests %+v", f.p.Requests())
	}
}

// TestFaultProxyStall: the body stops after StallAfter bytes and the
// connection stays open, so the client's own timeout ends the request.
func TestFaultProxyStall(t *testing.T) {
	f := startProxyFixture(t)
	f.p.Set(Fault{Mode: FaultStall, StallAfter: 1000, Paths: BlobPaths})
	f.c.Timeout = time.Second
	start := time.Now()
	resp, b, err := f.get("/v2/a/blobs/sha256:1")
	if err == nil || resp == nil || resp.StatusCode != 200 || len(b) != 1000 {
		t.Fatalf("stalled body: want a 200 holding at 1000 bytes until the client's timeout, got %v, %d bytes, %v", resp, len(b), err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("the stalled request ended after %v, before the client's timeout", d)
	}
	f.p.Pass()
	if _, b, err := f.get("/v2/a/blobs/sha256:1"); err != nil || !bytes.Equal(b, proxyBody) {
		t.Fatalf("after Pass: %d bytes, %v", len(b), err)
	}
	if f.p.Count(FaultStall) != 1 {
		t.Errorf("requests %+v", f.p.Requests())
	}
}
