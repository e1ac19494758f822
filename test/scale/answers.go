package scale

import (
	"maps"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// Answers counts the API server's answers to a fleet's requests by HTTP
// status, from the agents' side: a fleet whose writes were refused
// (403 by RBAC or an admission policy, 422 by validation) must not pass
// for a warm one.
type Answers struct {
	mu     sync.Mutex
	byCode map[int]int
}

// Count is how many answers had status code.
func (a *Answers) Count(code int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byCode[code]
}

// ByCode is a copy of every count, by status code.
func (a *Answers) ByCode() map[int]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.byCode)
}

// wrap returns a copy of cfg whose transport counts its answers here.
func (a *Answers) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{rt, a} })
	return cfg
}

// counting is a RoundTripper that counts the answers of the one it wraps.
type counting struct {
	next    http.RoundTripper
	answers *Answers
}

var _ http.RoundTripper = counting{}

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.answers.mu.Lock()
		if c.answers.byCode == nil {
			c.answers.byCode = map[int]int{}
		}
		c.answers.byCode[resp.StatusCode]++
		c.answers.mu.Unlock()
	}
	return resp, err
}
