package reboundhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fast is a policy whose waits are short enough for real-socket tests.
var fast = rebound.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond}

// fastLimit is the limit of the tests that use fast.
var fastLimit = reboundhttp.WithOptions(rebound.WithMaxAttempts(5))

func newTransport(t *testing.T, base http.RoundTripper, p rebound.Policy, opts ...reboundhttp.Option) *reboundhttp.Transport {
	t.Helper()
	if base == nil {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		base = tr
	}
	rt, err := reboundhttp.New(base, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// server answers with the statuses in order (then 200), counting requests.
type server struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header // added to every failure
	n        atomic.Int32
	keys     []string
	bodies   []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.n.Add(1)
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.bodies = append(s.bodies, string(b))
	code := http.StatusOK
	if len(s.statuses) > 0 {
		code, s.statuses = s.statuses[0], s.statuses[1:]
	}
	s.mu.Unlock()
	if code != http.StatusOK {
		for k, v := range s.header {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "%d", code)
}

func start(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRetriesIdempotentOnDefaultStatuses(t *testing.T) {
	s := &server{statuses: []int{503, 502, 429, 504}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	code, body := get(t, c, ts.URL)
	if code != 200 || body != "200" || s.n.Load() != 5 {
		t.Fatalf("got %d %q after %d requests, want 200 after 5", code, body, s.n.Load())
	}
}

func TestOther4xxAnd500StopAtOnce(t *testing.T) {
	for _, code := range []int{400, 404, 409, 500, 501} {
		s := &server{statuses: []int{code}}
		ts := start(t, s)
		c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
		got, body := get(t, c, ts.URL)
		if got != code || body != fmt.Sprint(code) || s.n.Load() != 1 {
			t.Errorf("%d: got %d %q after %d requests, want it returned after 1", code, got, body, s.n.Load())
		}
	}
}

func TestExhaustedReturnsLastResponse(t *testing.T) {
	s := &server{statuses: []int{503, 503, 503, 503, 503, 503}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	code, body := get(t, c, ts.URL)
	if code != 503 || body != "503" || s.n.Load() != 5 {
		t.Fatalf("got %d %q after %d requests, want the 5th 503 with its body", code, body, s.n.Load())
	}
}

func TestPOSTWithoutKeyIsNeverRepeated(t *testing.T) {
	s := &server{statuses: []int{503}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	resp, err := c.Post(ts.URL, "text/plain", strings.NewReader("order 42"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || s.n.Load() != 1 {
		t.Fatalf("got %d after %d requests, want 503 after 1", resp.StatusCode, s.n.Load())
	}
}

func TestPOSTResetAfterBodyIsNotRepeated(t *testing.T) {
	var applied atomic.Int32
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		applied.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close() // a reset: the outcome is unknown to the client
		}
	}))
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	_, err := c.Post(ts.URL, "text/plain", strings.NewReader("order 42"))
	if err == nil {
		t.Fatal("no error for a reset connection")
	}
	if applied.Load() != 1 {
		t.Fatalf("the POST was applied %d times, want 1", applied.Load())
	}
	// The same with a key: safe, so retried.
	applied.Store(0)
	req, _ := http.NewRequest("POST", ts.URL, strings.NewReader("order 43"))
	req.Header.Set("Idempotency-Key", "k43")
	if _, err := c.Do(req); err == nil {
		t.Fatal("no error")
	}
	if applied.Load() != 5 {
		t.Fatalf("keyed POST sent %d times, want 5 (MaxAttempts)", applied.Load())
	}
}

func TestIdempotencyKeySameOnEveryAttempt(t *testing.T) {
	s := &server{statuses: []int{503, 503}}
	ts := start(t, s)
	var n atomic.Int32
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit, reboundhttp.WithIdempotencyKey(func() string {
		return fmt.Sprint("key-", n.Add(1))
	}))}
	req, _ := http.NewRequest("POST", ts.URL, bytes.NewReader([]byte("payload")))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || s.n.Load() != 3 {
		t.Fatalf("got %d after %d requests", resp.StatusCode, s.n.Load())
	}
	for i, k := range s.keys {
		if k != "key-1" || s.bodies[i] != "payload" {
			t.Fatalf("attempt %d sent key %q body %q, want key-1 and the whole body", i, k, s.bodies[i])
		}
	}
	if req.Header.Get("Idempotency-Key") != "" {
		t.Fatal("the caller's request was changed")
	}
}

func TestBodyWithoutGetBodyIsSentOnce(t *testing.T) {
	s := &server{statuses: []int{503}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	req, _ := http.NewRequest("PUT", ts.URL, io.NopCloser(strings.NewReader("x"))) // no GetBody
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || s.n.Load() != 1 {
		t.Fatalf("got %d after %d requests, want 503 after 1", resp.StatusCode, s.n.Load())
	}
}

func TestRefusedConnectionRetriesEvenPOST(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // refused until the observer below starts the server
	s := &server{}
	srv := &http.Server{Handler: s}
	var once sync.Once
	var wg sync.WaitGroup
	defer wg.Wait()
	defer srv.Close()
	up := rebound.ObserverFunc(func(e rebound.Event) {
		if e.Kind == rebound.EventRetry && e.Attempt == 2 {
			once.Do(func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				wg.Go(func() { srv.Serve(l) })
			})
		}
	})
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit, reboundhttp.WithOptions(rebound.WithObserver(up)))}
	resp, err := c.Post("http://"+addr, "text/plain", strings.NewReader("order 44"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || s.n.Load() != 1 {
		t.Fatalf("got %d, server saw %d requests, want 200 and 1", resp.StatusCode, s.n.Load())
	}
}

func TestNeverEndingBodyIsDrainedBounded(t *testing.T) {
	var n atomic.Int32
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 2 {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(503)
		chunk := bytes.Repeat([]byte("x"), 1024)
		for r.Context().Err() == nil { // streams until the client closes
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	code, body := get(t, c, ts.URL)
	if code != 200 || body != "ok" || n.Load() != 3 {
		t.Fatalf("got %d %q after %d requests", code, body, n.Load())
	}
}

func TestInformationalAndRedirects(t *testing.T) {
	var n atomic.Int32
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/new", http.StatusFound)
		case "/new":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints) // a 1xx before the real answer
			if n.Add(1) == 1 {
				w.WriteHeader(503)
				return
			}
			io.WriteString(w, "new")
		}
	}))
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	code, body := get(t, c, ts.URL+"/old")
	if code != 200 || body != "new" || n.Load() != 2 {
		t.Fatalf("got %d %q after %d requests to /new", code, body, n.Load())
	}
	// A redirect is returned by the transport, not retried, when the client does not follow it.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if code, _ := get(t, c, ts.URL+"/old"); code != http.StatusFound {
		t.Fatalf("got %d, want 302", code)
	}
}

func TestClientTimeoutEndsAtOnceOnLongRetryAfter(t *testing.T) {
	s := &server{statuses: []int{503, 503}, header: http.Header{"Retry-After": {"99999999"}}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, rebound.Policy{}), Timeout: time.Minute}
	code, _ := get(t, c, ts.URL)
	// The wait (capped at MaxRetryAfter, 5 min) would end after the client's
	// deadline: the engine does not start it and the 503 is returned.
	if code != 503 || s.n.Load() != 1 {
		t.Fatalf("got %d after %d requests, want the 503 after 1", code, s.n.Load())
	}
}

func TestConcurrentUse(t *testing.T) {
	var hosts []string
	var servers []*server
	for range 3 {
		s := &server{statuses: []int{503, 503, 503, 503, 503, 503}}
		servers = append(servers, s)
		hosts = append(hosts, start(t, s).URL)
	}
	var built atomic.Int32
	rt := newTransport(t, nil, rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond},
		reboundhttp.WithHostOptions(func(host string) []rebound.Option {
			built.Add(1)
			return []rebound.Option{rebound.WithBudget(mustBudget(t))}
		}))
	c := &http.Client{Transport: rt}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			req, _ := http.NewRequest("PUT", hosts[i%3], strings.NewReader("v"))
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	if built.Load() != 3 {
		t.Fatalf("WithHostOptions called %d times, want once per host (3)", built.Load())
	}
	for i, s := range servers {
		if n := s.n.Load(); n < 20 || n > 26 {
			t.Errorf("host %d saw %d requests: 20 first attempts and 6 failures, each a retry", i, n)
		}
	}
}

func mustBudget(t *testing.T) *rebound.RetryBudget {
	b, err := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadArguments(t *testing.T) {
	if _, err := reboundhttp.New(nil, rebound.Policy{Multiplier: 0.5}); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("bad policy: %v", err)
	}
	if _, err := reboundhttp.New(nil, rebound.Policy{}, reboundhttp.WithClassifier(nil)); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithClassifier") {
		t.Errorf("nil classifier: %v", err)
	}
	if _, err := reboundhttp.New(nil, rebound.Policy{}, reboundhttp.WithOptions(rebound.WithBudget(nil))); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("bad engine option: %v", err)
	}
	rt, _ := reboundhttp.New(nil, rebound.Policy{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("done ctx: %v", err)
	}
}
