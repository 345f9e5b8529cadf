package testenv

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy for outage tests: it listens on 127.0.0.1 and a free port and forwards
// every connection to a target (a database, Redis, ...). Break cuts every live connection and
// makes new ones fail (accepted and closed at once, so clients see a reset or EOF) until
// Restore; the port stays the same throughout, so clients reconnect to the same address
// without being reopened. Safe for concurrent use.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener

	mu     sync.Mutex
	broken bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), closed in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port; point clients here instead of at the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Break closes every live connection and refuses new ones until Restore.
func (p *Proxy) Break() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore accepts and forwards connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = false
}

// Broken reports whether the proxy is between Break and Restore.
func (p *Proxy) Broken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}

// Close stops the proxy and closes every connection. Closing twice is a no-op.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		if p.broken || p.closed {
			p.mu.Unlock()
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, like a refused or dropped server
			}
			_ = c.Close()
			continue
		}
		p.track(c)
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track records c; p.mu must be held.
func (p *Proxy) track(c net.Conn) { p.conns[c] = struct{}{} }

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(client)
		return
	}
	p.mu.Lock()
	if p.broken || p.closed {
		p.mu.Unlock()
		_ = server.Close()
		p.untrack(client)
		return
	}
	p.track(server)
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done // one side ended: end both
	p.untrack(client, server)
	<-done
}
