package faults

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLinkProxyShared: two downloads at once through a link proxy share
// its rate, so together they take as long as both bytes at that rate; a
// slow proxy gives each its own.
func TestLinkProxyShared(t *testing.T) {
	body := strings.Repeat("x", 256<<10)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	t.Cleanup(upstream.Close)
	target := strings.TrimPrefix(upstream.URL, "http://")
	both := func(host string) time.Duration {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				resp, err := c.Get("http://" + host + "/")
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				if b, err := io.ReadAll(resp.Body); err != nil || len(b) != len(body) {
					t.Errorf("%d bytes, %v", len(b), err)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// 512 KiB at 512 KiB/s: a second shared, half a second each alone.
	shared := both(StartLinkProxy(t, target, 512<<10).Host)
	apart := both(StartSlowProxy(t, target, 512<<10).Host)
	t.Logf("two downloads: %v over one link, %v each at its own rate", shared, apart)
	if shared < 800*time.Millisecond {
		t.Errorf("two downloads over one 512 KiB/s link took %v, under a second's worth", shared)
	}
	if apart > shared*3/4 {
		t.Errorf("each at its own rate took %v, not much less than shared (%v)", apart, shared)
	}
}
