// Command http compares three HTTP clients on one local fault server:
// rebound's transport (reboundhttp, with and without WithIdempotencyKey),
// hashicorp/go-retryablehttp v0.7.8 and a naive fixed-sleep loop.
//
// Each client runs -clients goroutines that start together; each makes a
// GET, then a POST (an order, one per goroutine). A fresh fault server per
// client:
//
//   - refuses connections for -down (its listener is closed), then returns;
//   - answers 503 without Retry-After for the next 500 ms, then 503 with
//     "Retry-After: 1" for 500 ms;
//   - then serves, except that it resets the connection after reading the
//     body of each order's first POST (the order is applied: the client
//     cannot know it), and applies a POST whose Idempotency-Key it has seen
//     only once.
//
// It prints, per client: requests received, duplicate POSTs applied (an
// order applied twice), POSTs whose outcome the caller was left not
// knowing (an error returned), time to success (median and slowest of the
// goroutines that got both answers), the peak of requests per 100 ms in
// the first second after the server's return, and connections opened.
//
// Usage:
//
//	go run ./examples/http [-clients 100] [-down 1s]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.clients, "clients", 100, "goroutines per client, starting together")
	flag.DurationVar(&cfg.down, "down", time.Second, "how long the server refuses connections")
	flag.Parse()
	if _, err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}

type config struct {
	clients int
	down    time.Duration
}

// result is one client's figures.
type result struct {
	name                                  string
	requests, duplicates, unknown, failed int
	median, slowest                       time.Duration
	peak, conns                           int
}

// A client does one request to completion as a Go HTTP client would:
// retried or not, it returns the final response or an error.
type client func(ctx context.Context, method, url string, body []byte) (*http.Response, error)

var clients = []struct {
	name string
	make func(*http.Transport) client
}{
	{"rebound", func(tr *http.Transport) client { return reboundClient(tr, false) }},
	{"rebound+key", func(tr *http.Transport) client { return reboundClient(tr, true) }},
	{"go-retryablehttp", retryableClient},
	{"fixed 100ms loop", fixedClient},
}

func reboundClient(tr *http.Transport, key bool) client {
	var opts []reboundhttp.Option
	if key {
		opts = append(opts, reboundhttp.WithIdempotencyKey(nil))
	}
	rt, err := reboundhttp.New(tr, rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}, opts...)
	if err != nil {
		panic(err) // a constant, valid configuration
	}
	c := &http.Client{Transport: rt}
	return func(ctx context.Context, method, url string, body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		return c.Do(req)
	}
}

func retryableClient(tr *http.Transport) client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: tr}
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = 100*time.Millisecond, time.Second, 100
	return func(ctx context.Context, method, url string, body []byte) (*http.Response, error) {
		req, err := retryablehttp.NewRequestWithContext(ctx, method, url, body)
		if err != nil {
			return nil, err
		}
		return c.Do(req)
	}
}

// fixedClient is the loop the project exists to replace: every error and
// every 5xx retried after a fixed sleep, the failed body closed unread.
func fixedClient(tr *http.Transport) client {
	c := &http.Client{Transport: tr}
	return func(ctx context.Context, method, url string, body []byte) (*http.Response, error) {
		var last error
		for range 200 {
			req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			resp, err := c.Do(req)
			if err == nil && resp.StatusCode < 500 {
				return resp, nil
			}
			if err == nil {
				resp.Body.Close()
				err = errors.New(resp.Status)
			}
			last = err
			time.Sleep(100 * time.Millisecond) // the naive part, on purpose
		}
		return nil, last
	}
}

// run runs every client against its own fault server, prints the table to
// w and returns the figures.
func run(cfg config, w io.Writer) ([]result, error) {
	if cfg.clients <= 0 || cfg.down <= 0 {
		return nil, fmt.Errorf("-clients and -down must be > 0")
	}
	var results []result
	for _, c := range clients {
		r, err := scenario(cfg, c.name, c.make)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "client\trequests\tduplicate POSTs applied\tPOST outcome unknown\tfailed\tsuccess median\tslowest\tpeak/100ms at return\tconnections\t\n")
	for _, r := range results {
		median, slowest := "-", "-"
		if r.slowest > 0 {
			median, slowest = r.median.Round(time.Millisecond).String(), r.slowest.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t\n", r.name, r.requests, r.duplicates, r.unknown,
			r.failed, median, slowest, r.peak, r.conns)
	}
	return results, tw.Flush()
}

// scenario runs one client's goroutines against a fresh fault server.
func scenario(cfg config, name string, mk func(*http.Transport) client) (result, error) {
	s, err := newFaultServer(cfg.down)
	if err != nil {
		return result{}, err
	}
	defer s.close()
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.clients}
	defer tr.CloseIdleConnections()
	do := mk(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "http://" + s.addr
	var (
		mu        sync.Mutex
		durations []time.Duration
		unknown   int
		failed    int
		wg        sync.WaitGroup
	)
	for i := range cfg.clients {
		wg.Go(func() {
			err := errors.Join(call(ctx, do, "GET", url+"/item", nil),
				call(ctx, do, "POST", url+"/order", []byte("order-"+strconv.Itoa(i))))
			mu.Lock()
			defer mu.Unlock()
			var pe *postError
			switch {
			case err == nil:
				durations = append(durations, time.Since(s.t0))
			case errors.As(err, &pe):
				unknown++
			default:
				failed++
			}
		})
	}
	wg.Wait()
	r := s.figures()
	r.name, r.unknown, r.failed = name, unknown, failed
	if len(durations) > 0 {
		slices.Sort(durations)
		r.median, r.slowest = durations[len(durations)/2], durations[len(durations)-1]
	}
	return r, nil
}

// postError is a POST that ended in an error with no answer: the caller
// does not know whether the order was applied.
type postError struct{ err error }

func (e *postError) Error() string { return "POST outcome unknown: " + e.err.Error() }

func call(ctx context.Context, do client, method, url string, body []byte) error {
	resp, err := do(ctx, method, url, body)
	if err != nil {
		if method == "POST" {
			return &postError{err}
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return errors.New(method + ": " + resp.Status)
	}
	return nil
}

// faultServer is the local server with its faults and its counters.
type faultServer struct {
	addr     string
	t0, back time.Time // start, return
	srv      *http.Server
	served   chan error
	timer    *time.Timer

	mu       sync.Mutex
	requests int
	buckets  [10]int // requests per 100 ms in the first second after the return
	applied  map[string]int
	keys     map[string]bool
	reset    map[string]bool
	dupes    int
	conns    atomic.Int32
}

func newFaultServer(down time.Duration) (*faultServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &faultServer{addr: l.Addr().String(), applied: map[string]int{}, keys: map[string]bool{},
		reset: map[string]bool{}, served: make(chan error, 1)}
	l.Close() // refused until the return
	s.srv = &http.Server{Handler: s, ErrorLog: log.New(io.Discard, "", 0), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	s.t0 = time.Now()
	s.back = s.t0.Add(down)
	s.timer = time.AfterFunc(down, func() {
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			s.served <- err
			return
		}
		s.served <- s.srv.Serve(l)
	})
	return s, nil
}

func (s *faultServer) close() {
	if s.timer.Stop() {
		return // never started
	}
	_ = s.srv.Close()
	<-s.served
}

func (s *faultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	since := time.Since(s.back)
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests++
	if b := int(since / (100 * time.Millisecond)); b >= 0 && b < len(s.buckets) {
		s.buckets[b]++
	}
	s.mu.Unlock()
	switch {
	case since < 500*time.Millisecond:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case since < time.Second:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case r.Method != http.MethodPost:
		_, _ = io.WriteString(w, "item")
		return
	}
	order, key := string(body), r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	apply := key == "" || !s.keys[key]
	if apply {
		if s.applied[order]++; s.applied[order] > 1 {
			s.dupes++
		}
		if key != "" {
			s.keys[key] = true
		}
	}
	reset := !s.reset[order]
	s.reset[order] = true
	s.mu.Unlock()
	if reset { // applied, but the client never hears of it
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
		}
		return
	}
	_, _ = io.WriteString(w, "ordered")
}

func (s *faultServer) figures() result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return result{requests: s.requests, duplicates: s.dupes, peak: slices.Max(s.buckets[:]), conns: int(s.conns.Load())}
}
