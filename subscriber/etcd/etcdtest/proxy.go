package etcdtest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// proxy forwards TCP connections from a public loopback address to a
// member's client listener. Stopping it closes the listener and every
// connection at once, which is what clients of a crashed process see; it
// also lets the member's gRPC server stop at once (a graceful stop would
// wait for open watch streams).
type proxy struct {
	addr   string // public host:port, fixed
	target string // the member's client listener

	blackhole atomic.Bool // drop every byte, keep the connections open

	mu    sync.Mutex
	ln    net.Listener // nil while stopped
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // accept loop and connection goroutines
}

func newProxy(addr, target string) *proxy {
	return &proxy{addr: addr, target: target, conns: map[net.Conn]struct{}{}}
}

// start listens on the public address and serves until stop.
func (p *proxy) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp4", p.addr)
	if err != nil {
		return fmt.Errorf("etcdtest: listen on %s: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by stop
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers a connection; it reports false once the proxy stopped.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.Dial("tcp4", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, blackholeReader{src, &p.blackhole})
		// Either direction ending ends the connection, as a crash would.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
}

// stop closes the listener and every connection and waits for the
// proxy's goroutines.
func (p *proxy) stop() {
	p.blackhole.Store(false)
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// blackholeReader reads from r and, while on is set, drops what it read
// (a blackholed path: the bytes never arrive, the connection stays open).
type blackholeReader struct {
	r  io.Reader
	on *atomic.Bool
}

func (b blackholeReader) Read(p []byte) (int, error) {
	for {
		n, err := b.r.Read(p)
		if err != nil || !b.on.Load() {
			return n, err
		}
	}
}

// dropConnections closes every connection (the listener stays).
func (p *proxy) dropConnections() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
