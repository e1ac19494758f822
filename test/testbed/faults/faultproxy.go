package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultMode is how a FaultProxy answers a request its fault applies to.
type FaultMode int

// Fault modes.
const (
	// FaultPass passes requests through to the registry unchanged.
	FaultPass FaultMode = iota
	// Fault500 answers 500 Internal Server Error without asking the
	// registry.
	Fault500
	// Fault429 answers 429 Too Many Requests with a Retry-After header.
	Fault429
	// FaultReset asks the registry, sends the first ResetAfter bytes of
	// its response and then resets the connection (a TCP RST, not a
	// clean close).
	FaultReset
	// FaultSlow passes the registry's response bodies through at Rate
	// bytes a second.
	FaultSlow
	// FaultStall passes the first StallAfter bytes of each response body
	// and then sends nothing more, holding the connection open until the
	// client gives up: a registry or middlebox that hangs mid-blob.
	FaultStall
)

func (m FaultMode) String() string {
	switch m {
	case FaultPass:
		return "pass"
	case Fault500:
		return "500"
	case Fault429:
		return "429"
	case FaultReset:
		return "reset"
	case FaultSlow:
		return "slow"
	case FaultStall:
		return "stall"
	}
	return fmt.Sprintf("FaultMode(%d)", int(m))
}

// FaultPaths limits a fault to some of the registry's paths; the others
// pass through.
type FaultPaths int

// Path scopes of a fault.
const (
	// AllPaths: every request.
	AllPaths FaultPaths = iota
	// BlobPaths: /v2/<name>/blobs/... only (layers and configs).
	BlobPaths
	// ManifestPaths: /v2/<name>/manifests/... only.
	ManifestPaths
)

func (s FaultPaths) match(path string) bool {
	switch s {
	case BlobPaths:
		return strings.Contains(path, "/blobs/")
	case ManifestPaths:
		return strings.Contains(path, "/manifests/")
	}
	return true
}

// Fault is what a FaultProxy does to the requests in its scope.
type Fault struct {
	Mode  FaultMode
	Paths FaultPaths
	// RetryAfter is the Retry-After of Fault429, in whole seconds
	// (at least 1).
	RetryAfter time.Duration
	// ResetAfter is how many bytes of the response (status line and
	// headers included) FaultReset sends before the reset; 0 resets
	// before anything is sent.
	ResetAfter int
	// Rate is FaultSlow's body rate in bytes a second.
	Rate int
	// StallAfter is how many body bytes FaultStall sends before it stops.
	StallAfter int
}

// ProxyRequest is one request a FaultProxy saw.
type ProxyRequest struct {
	At time.Time
	// Done is when the proxy finished answering it (the body sent, or the
	// connection reset); zero while it is under way.
	Done   time.Time
	Method string
	Path   string
	// User is the user name of the request's basic-auth credentials, ""
	// when it sent none. The password is never kept.
	User string
	// Mode is how it was answered: FaultPass when the fault did not
	// apply to its path.
	Mode FaultMode
}

// FaultProxy is an HTTP reverse proxy on loopback in front of a registry
// that injects faults on demand: server errors, rate limits, connection
// resets and slow bodies. No real registry does these when asked to, so the
// registry fault tests put this between containerd and a real
// docker-registry. Image references use Host instead of the registry's;
// containerd reaches loopback registries over plain HTTP without
// configuration.
type FaultProxy struct {
	// Host is host:port, to use in image references instead of the
	// registry's.
	Host string

	target string
	srv    *http.Server
	rp     *httputil.ReverseProxy
	trans  *http.Transport

	mu    sync.Mutex
	fault Fault
	log   []ProxyRequest
}

type faultKey struct{}

// StartFaultProxy proxies to target ("127.0.0.1:port"), passing everything
// through until Set says otherwise. It stops at cleanup.
func StartFaultProxy(t TB, target string) *FaultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{Host: l.Addr().String(), target: target}
	// Connections to the registry are not reused across faults: a reset
	// or a stopped registry must not leave a broken one in the pool.
	p.trans = &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: time.Minute}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: target})
			// Keep the Host the client asked for: the registry puts it in
			// Location headers, which must lead back through the proxy.
			r.Out.Host = r.In.Host
		},
		Transport:      p.trans,
		FlushInterval:  -1,
		ModifyResponse: slowBody,
		// A stopped registry gives 502 Bad Gateway, as a load balancer
		// in front of it would; the log line per request is noise.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.Close)
	return p
}

// Close stops the proxy and cuts every connection.
func (p *FaultProxy) Close() {
	_ = p.srv.Close()
	p.trans.CloseIdleConnections()
}

// Set switches the fault for requests from now on. Responses already under
// way keep the fault they started with.
func (p *FaultProxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// Pass switches faults off.
func (p *FaultProxy) Pass() { p.Set(Fault{}) }

// Count returns how many requests were answered in mode.
func (p *FaultProxy) Count(mode FaultMode) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.log {
		if r.Mode == mode {
			n++
		}
	}
	return n
}

// Requests returns every request seen so far, oldest first.
func (p *FaultProxy) Requests() []ProxyRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProxyRequest(nil), p.log...)
}

// ServeHTTP applies the current fault to r.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, i := p.record(r)
	defer p.done(i)
	switch f.Mode {
	case Fault500:
		registryError(w, http.StatusInternalServerError, "UNKNOWN", "injected server error")
	case Fault429:
		w.Header().Set("Retry-After", strconv.Itoa(max(int(f.RetryAfter/time.Second), 1)))
		registryError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", "injected rate limit")
	case FaultReset:
		p.reset(w, r, f.ResetAfter)
	default:
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, f)))
	}
}

// record logs r and returns the fault that applies to it, and r's place
// in the log.
func (p *FaultProxy) record(r *http.Request) (Fault, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if !f.Paths.match(r.URL.Path) {
		f = Fault{}
	}
	user, _, _ := r.BasicAuth()
	p.log = append(p.log, ProxyRequest{At: time.Now(), Method: r.Method, Path: r.URL.Path, User: user, Mode: f.Mode})
	return f, len(p.log) - 1
}

// done notes when the i-th request was answered.
func (p *FaultProxy) done(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log[i].Done = time.Now()
}

// registryError answers in the registry API's error format.
func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`+"\n", code, msg)
}

// slowBody throttles the body of a FaultSlow response, and stops that of
// a FaultStall one.
func slowBody(resp *http.Response) error {
	f, ok := resp.Request.Context().Value(faultKey{}).(Fault)
	switch {
	case ok && f.Mode == FaultSlow:
		resp.Body = &slowReader{rc: resp.Body, rate: max(f.Rate, 1)}
	case ok && f.Mode == FaultStall:
		resp.Body = &stallReader{rc: resp.Body, left: f.StallAfter, ctx: resp.Request.Context()}
	}
	return nil
}

// stallReader hands out left bytes, then blocks until ctx ends (the
// client went away, or the proxy closed).
type stallReader struct {
	rc   io.ReadCloser
	left int
	ctx  context.Context
}

func (s *stallReader) Read(b []byte) (int, error) {
	if s.left <= 0 {
		<-s.ctx.Done()
		return 0, s.ctx.Err()
	}
	n, err := s.rc.Read(b[:min(len(b), s.left)])
	s.left -= n
	return n, err
}

func (s *stallReader) Close() error { return s.rc.Close() }

// reset forwards r, writes the first n bytes of the registry's response to
// the client and resets the connection. SetLinger(0) makes Close send a RST
// instead of a FIN, as a crashed peer or a middlebox dropping the flow does.
func (p *FaultProxy) reset(w http.ResponseWriter, r *http.Request, n int) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fault proxy: connection cannot be hijacked")
	}
	var resp *http.Response
	if n > 0 {
		var err error
		if resp, err = p.forward(r); err != nil {
			registryError(w, http.StatusBadGateway, "UNAVAILABLE", err.Error())
			return
		}
		defer resp.Body.Close()
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if resp != nil {
		lw := &limitedWriter{w: buf.Writer, n: n}
		_ = resp.Write(lw)
		_ = buf.Flush()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// forward sends r to the registry as it came, Host header included.
func (p *FaultProxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", p.target
	return p.trans.RoundTrip(out)
}

// limitedWriter takes n bytes, then fails every write.
type limitedWriter struct {
	w *bufio.Writer
	n int
}

var errLimit = errors.New("fault proxy: reset point reached")

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errLimit
	}
	short := len(b) > l.n
	if short {
		b = b[:l.n]
	}
	n, err := l.w.Write(b)
	l.n -= n
	if err == nil && short {
		err = errLimit
	}
	return n, err
}

// slowReader hands out at most rate bytes a second, in 50 ms steps.
type slowReader struct {
	rc   io.ReadCloser
	rate int
	last time.Time
}

func (s *slowReader) Read(b []byte) (int, error) {
	const step = 50 * time.Millisecond
	if !s.last.IsZero() {
		time.Sleep(step - time.Since(s.last))
	}
	s.last = time.Now()
	chunk := max(s.rate/int(time.Second/step), 1)
	return s.rc.Read(b[:min(len(b), chunk)])
}

func (s *slowReader) Close() error { return s.rc.Close() }
