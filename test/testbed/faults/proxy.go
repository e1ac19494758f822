package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// SlowProxy is a TCP proxy on loopback that passes a registry's responses
// through at a fixed rate, so pulls take long enough to be caught under
// way (cancellation, deletion mid-pull). Each connection has the rate to
// itself, unless the proxy is a shared link (StartLinkProxy).
type SlowProxy struct {
	// Host is host:port, to use in image references instead of the
	// registry's.
	Host string

	l      net.Listener
	target string
	rate   int           // bytes per second, registry to client
	link   *rate.Limiter // shared by every connection; nil: none
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	sent   atomic.Int64 // bytes passed from the registry to clients
}

// StartSlowProxy proxies to target ("127.0.0.1:port") at bytesPerSecond and
// stops at cleanup.
func StartSlowProxy(t TB, target string, bytesPerSecond int) *SlowProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SlowProxy{Host: l.Addr().String(), l: l, target: target, rate: bytesPerSecond, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// StartLinkProxy proxies to target ("127.0.0.1:port") over one link of
// bytesPerSecond that every connection shares, as pulls share a node's
// network link, and stops at cleanup.
func StartLinkProxy(t TB, target string, bytesPerSecond int) *SlowProxy {
	t.Helper()
	p := StartSlowProxy(t, target, bytesPerSecond)
	p.mu.Lock()
	p.link = rate.NewLimiter(rate.Limit(bytesPerSecond), max(bytesPerSecond/20, 64<<10))
	p.mu.Unlock()
	return p
}

// Sent is how many bytes the proxy has passed from the registry to its
// clients: what crossed the link.
func (p *SlowProxy) Sent() int64 { return p.sent.Load() }

// Close stops the proxy and cuts every connection.
func (p *SlowProxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *SlowProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *SlowProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *SlowProxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	for _, c := range []net.Conn{client, server} {
		p.track(c, true)
		defer p.track(c, false)
		defer c.Close()
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	p.mu.Lock()
	link := p.link
	p.mu.Unlock()
	if link == nil {
		// The connection's own rate, in chunks of a twentieth of it.
		link = rate.NewLimiter(rate.Limit(p.rate), max(p.rate/20, 1))
	}
	go func() { _ = copyLimited(client, server, link, &p.sent); done <- struct{}{} }()
	<-done
}

// copyLimited copies src to dst, each chunk waiting for its bytes on
// link: the connection's own, or one that several share; sent counts the
// bytes written.
func copyLimited(dst io.Writer, src io.Reader, link *rate.Limiter, sent *atomic.Int64) error {
	buf := make([]byte, min(link.Burst(), 32<<10))
	for {
		// Read, not ReadFull: a short response must not wait for a full
		// chunk that never comes on a kept-alive connection.
		n, err := src.Read(buf)
		if n > 0 {
			if werr := link.WaitN(context.Background(), n); werr != nil {
				return werr
			}
			w, werr := dst.Write(buf[:n])
			sent.Add(int64(w))
			if werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
