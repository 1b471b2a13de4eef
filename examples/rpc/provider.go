package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap"
)

// Notification is the argument of the Notify method.
type Notification struct {
	ID      int    `json:"id"`
	To      string `json:"to"`
	Message string `json:"message"`
}

// receipts records, across every provider of the run, which notification
// IDs the providers accepted (answered 2xx). It is the ground truth the
// consumer's accounting is checked against. Safe for concurrent use.
type receipts struct {
	mu  sync.Mutex
	ids map[int][]string // notification ID -> providers that accepted it, in order
}

func newReceipts() *receipts { return &receipts{ids: map[int][]string{}} }

func (r *receipts) add(id int, provider string) {
	r.mu.Lock()
	r.ids[id] = append(r.ids[id], provider)
	r.mu.Unlock()
}

// snapshot returns a copy of the receipts.
func (r *receipts) snapshot() map[int][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int][]string, len(r.ids))
	for id, ps := range r.ids {
		out[id] = slices.Clone(ps)
	}
	return out
}

// providerOptions configure a provider.
type providerOptions struct {
	service string
	// shedEvery makes the provider answer every shedEvery-th Notify with
	// 503 and a Retry-After header, as an overloaded server would; 0
	// never.
	shedEvery int
	// retryAfter is the Retry-After the provider sends, in whole seconds.
	retryAfter int
	// log receives the HTTP server's own error log, at Warn.
	log *zap.Logger
}

// provider is one RPC provider: an HTTP server on a loopback port that
// accepts POST /Notify, registered in the registry as an ephemeral instance
// through its own nacos-sdk-go client (one client per provider, as one per
// process in production).
type provider struct {
	name string
	addr string // ip:port
	port int
	opts providerOptions
	rec  *receipts

	srv       *http.Server
	serveDone chan struct{}
	serveErr  error // set before serveDone is closed
	client    naming_client.INamingClient

	// Handler accounting: a handler that starts after stop has begun
	// refuses the request, so that stop can wait for the handlers.
	mu       sync.Mutex
	stopping bool
	handlers sync.WaitGroup

	requests atomic.Int64 // well-formed Notify requests, shed ones included
	accepted atomic.Int64
	shed     atomic.Int64
	rejected atomic.Int64 // answered 4xx

	stopOnce sync.Once
	state    string // "serving", "killed", "stopped"; for the report
}

// startProvider starts a provider on a free loopback port that is not in
// avoid, and registers it through a new client of reg. On error it leaves
// nothing running.
func startProvider(name string, reg *registry, rec *receipts, o providerOptions, avoid map[int]bool) (*provider, error) {
	ln, err := listenAvoiding(avoid)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	p := &provider{
		name:      name,
		addr:      ln.Addr().String(),
		port:      port,
		opts:      o,
		rec:       rec,
		serveDone: make(chan struct{}),
		state:     "serving",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /Notify", p.notify)
	p.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          mustStdLog(o.log.Named("http")),
	}
	go func() {
		defer close(p.serveDone)
		if err := p.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.serveErr = err
		}
	}()

	client, err := reg.newClient("provider-" + name)
	if err != nil {
		p.closeHTTP()
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	// A provider's client registers exactly one instance, once: if the
	// SDK's start-up redo (its asynchronous CONNECTED event) re-sends the
	// registration, it re-sends this same instance, which is harmless.
	ok, err := client.RegisterInstance(p.instance())
	if err == nil && !ok {
		err = errors.New("registry refused the registration")
	}
	if err != nil {
		client.CloseClient()
		p.closeHTTP()
		return nil, fmt.Errorf("provider %s: register %s: %w", name, p.addr, err)
	}
	p.client = client
	return p, nil
}

// listenAvoiding listens on a free loopback port outside avoid, so that a
// restarted provider is visibly on a new port.
func listenAvoiding(avoid map[int]bool) (net.Listener, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range 20 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		if !avoid[ln.Addr().(*net.TCPAddr).Port] {
			return ln, nil
		}
		held = append(held, ln) // keep it so the next Listen gets another port
	}
	return nil, errors.New("no free port outside the ones to avoid")
}

func (p *provider) instance() vo.RegisterInstanceParam {
	return vo.RegisterInstanceParam{
		Ip:          "127.0.0.1",
		Port:        uint64(p.port),
		ServiceName: p.opts.service,
		Weight:      1,
		Enable:      true, // disabled instances are hidden from subscribers
		Healthy:     true,
		Ephemeral:   true, // lives as long as the client's connection
		Metadata:    map[string]string{"provider": p.name, "protocol": "http+json"},
	}
}

// notify is the Notify method: it accepts a well-formed notification with a
// recipient, records its ID and answers 200; it answers 400 to a malformed
// one and, every shedEvery-th request, 503 with Retry-After.
func (p *provider) notify(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "provider stopping"})
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()

	var n Notification
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&n); err != nil {
		p.rejected.Add(1)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON: " + err.Error()})
		return
	}
	if n.To == "" {
		p.rejected.Add(1)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("notification %d has no recipient", n.ID)})
		return
	}
	if k := p.requests.Add(1); p.opts.shedEvery > 0 && k%int64(p.opts.shedEvery) == 0 {
		p.shed.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(p.opts.retryAfter))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "overloaded"})
		return
	}
	p.rec.add(n.ID, p.name)
	p.accepted.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{"id": n.ID, "provider": p.name})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// kill crashes the provider: its port closes at once, with every open
// connection (calls in flight fail, new ones are refused), and its registry
// client closes without deregistering, so the registry removes the instance
// when it sees the connection end, as it does for a crashed process.
func (p *provider) kill() error {
	var err error
	p.stopOnce.Do(func() {
		p.state = "killed"
		err = p.closeHTTP()
		p.client.CloseClient()
	})
	return err
}

// stop shuts the provider down gracefully: deregister first, so that
// consumers stop picking it, then finish the calls in flight (bounded by
// ctx), then close the registry client.
func (p *provider) stop(ctx context.Context) error {
	var errs []error
	p.stopOnce.Do(func() {
		p.state = "stopped"
		if _, err := p.client.DeregisterInstance(vo.DeregisterInstanceParam{
			Ip: "127.0.0.1", Port: uint64(p.port), ServiceName: p.opts.service, Ephemeral: true,
		}); err != nil {
			errs = append(errs, fmt.Errorf("provider %s: deregister: %w", p.name, err))
		}
		if err := p.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("provider %s: shutdown: %w", p.name, err))
		}
		errs = append(errs, p.closeHTTP())
		p.client.CloseClient()
	})
	return errors.Join(errs...)
}

// closeHTTP closes the server and its connections, and waits for the Serve
// goroutine and every handler to return.
func (p *provider) closeHTTP() error {
	err := p.srv.Close()
	<-p.serveDone
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	p.handlers.Wait()
	if p.serveErr != nil {
		return fmt.Errorf("provider %s: serve: %w", p.name, p.serveErr)
	}
	if err != nil {
		return fmt.Errorf("provider %s: close: %w", p.name, err)
	}
	return nil
}

// mustStdLog adapts log for http.Server.ErrorLog, at Warn.
func mustStdLog(log *zap.Logger) *stdlog.Logger {
	l, err := zap.NewStdLogAt(log, zap.WarnLevel)
	if err != nil { // only for an invalid level
		panic(err)
	}
	return l
}
