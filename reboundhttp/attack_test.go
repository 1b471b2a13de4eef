package reboundhttp_test

import (
	"context"
	"crypto/tls"
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
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

// A failed response whose body trickles (one byte, then nothing until the
// client goes) must not hold the retry until the request's context ends:
// the drain is bounded in time as well as in bytes.
func TestSlowFailedBodyDoesNotHoldTheRetry(t *testing.T) {
	var n atomic.Int32
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(503)
		w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // trickles no more until the client closes
	}))
	c := &http.Client{Transport: newTransport(t, nil, rebound.Policy{Initial: time.Millisecond}, reboundhttp.WithOptions(rebound.WithMaxAttempts(2)))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound, not a timing: the fix needs a fraction of it
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("the retry waited on the failed response's body until the context ended: %v (server saw %d requests)", err, n.Load())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" || n.Load() != 2 {
		t.Fatalf("got %d %q after %d requests, want 200 \"ok\" after 2", resp.StatusCode, b, n.Load())
	}
}

// A classifier that panics on a response must not leak that response's
// body (its connection): the panic goes on, the body is closed.
func TestClassifierPanicClosesTheResponse(t *testing.T) {
	f := &fake{answer: func(int) *http.Response { return status(503, "") }}
	rt := newTransport(t, f, fast, fastLimit, reboundhttp.WithClassifier(func(*http.Response, error, bool) bool { panic("classifier") }))
	req, _ := http.NewRequest(http.MethodGet, "http://h.example/", nil)
	func() {
		defer func() {
			if p := recover(); p != "classifier" {
				t.Fatalf("recovered %v, want the classifier's panic", p)
			}
		}()
		rt.RoundTrip(req)
	}()
	if len(f.bodies) != 1 || !f.bodies[0].closed.Load() {
		t.Fatalf("%d responses, the first's body closed: %v; want 1, closed", len(f.bodies), len(f.bodies) == 1 && f.bodies[0].closed.Load())
	}
}

// WithHostOptions promises one call per host: two first requests to a host
// at once must not both call perHost (one of them waits for the other's).
func TestHostOptionsOnceUnderConcurrentFirstRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok"))}, nil
		})
		var calls atomic.Int32
		release := make(chan struct{})
		rt := newTransport(t, ok, fast, fastLimit, reboundhttp.WithHostOptions(func(string) []rebound.Option {
			if calls.Add(1) == 1 {
				<-release // the first request is still building the host's Retrier
			}
			return nil
		}))
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "http://h.example/", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("WithHostOptions's perHost called %d times for one host, want once", n)
		}
	})
}

// Without WithHostOptions every host's Retrier would be the same: a
// Transport that reaches ever new hosts (webhooks, crawlers) must not keep
// one per host it ever saw. A request to a new host costs what a request
// to a known one costs.
func TestNewHostsKeepNothingWithoutHostOptions(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	rt := newTransport(t, roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }), fast, fastLimit)
	const runs = 200
	reqs := make([]*http.Request, runs+1)
	for i := range reqs {
		reqs[i], _ = http.NewRequest(http.MethodGet, fmt.Sprintf("http://h%d.example/", i), nil)
	}
	i := 0
	fresh := testing.AllocsPerRun(runs, func() { rt.RoundTrip(reqs[i]); i++ })
	known := testing.AllocsPerRun(runs, func() { rt.RoundTrip(reqs[0]) })
	if fresh != known {
		t.Fatalf("a request to a new host allocates %v, to a known host %v: the Transport keeps state per host it saw", fresh, known)
	}
}

// A POST without a key on a kept-alive connection that dies after the
// server read it: net/http does not resend it (not replayable) and neither
// does the Transport (outcome unknown). A keyed one may be sent by
// net/http again on its own, outside the policy's attempts (docs/http.md).
func TestPOSTOnDeadKeepAliveAppliedOnce(t *testing.T) {
	var posts atomic.Int32
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, "warm")
			return
		}
		io.ReadAll(r.Body)
		posts.Add(1)
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close() // applied, then the connection dies before any answer
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := &http.Client{Transport: newTransport(t, nil, rebound.Policy{Initial: time.Millisecond}, reboundhttp.WithOptions(rebound.WithMaxAttempts(5)))}
	resp, err := c.Get(ts.URL) // a kept-alive connection for the POST to reuse
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("order"))
	if _, err := c.Do(req); err == nil {
		t.Fatal("the POST succeeded; the server never answered it")
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("the server applied the POST %d times (over %d connections), want once", n, conns.Load())
	}
}

// An empty Idempotency-Key is no key: a server cannot deduplicate by it,
// so a POST carrying one (or given one by a newKey that returns "") is not
// safe to repeat.
func TestEmptyIdempotencyKeyIsNoKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []reboundhttp.Option
		hdr  bool
	}{
		{"newKey returns empty", []reboundhttp.Option{reboundhttp.WithIdempotencyKey(func() string { return "" })}, false},
		{"caller's empty header", nil, true},
	} {
		s := &server{statuses: []int{503, 503}}
		ts := start(t, s)
		c := &http.Client{Transport: newTransport(t, nil, fast, append([]reboundhttp.Option{fastLimit}, tc.opts...)...)}
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("order"))
		if tc.hdr {
			req.Header.Set("Idempotency-Key", "")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := s.n.Load(); n != 1 {
			t.Errorf("%s: a POST with an empty key was sent %d times, want once", tc.name, n)
		}
	}
}

// The caller's request is not changed by retries, a key or rewinds, and
// the final response's body is the server's, unread.
func TestCallerRequestUnchangedAndFinalBodyUnread(t *testing.T) {
	s := &server{statuses: []int{503, 502}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit, reboundhttp.WithIdempotencyKey(nil))}
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("order"))
	req.Header.Set("X-Caller", "1")
	body, getBody, cl := req.Body, req.GetBody, req.ContentLength
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "200" {
		t.Fatalf("final body %q, %v; want \"200\"", b, err)
	}
	if len(req.Header) != 1 || req.Header.Get("X-Caller") != "1" || req.Body != body || req.GetBody == nil || req.ContentLength != cl {
		t.Fatalf("the caller's request changed: header %v, body same %v, GetBody %v, ContentLength %d", req.Header, req.Body == body, getBody != nil, req.ContentLength)
	}
	if s.n.Load() != 3 || s.bodies[2] != "order" || s.keys[0] == "" || s.keys[0] != s.keys[2] {
		t.Fatalf("server saw %d requests, bodies %q, keys %q; want 3 with the body and one key", s.n.Load(), s.bodies, s.keys)
	}
}

// A GetBody that fails on a rewind stops the request with its error.
func TestGetBodyErrorStops(t *testing.T) {
	s := &server{statuses: []int{503}}
	ts := start(t, s)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	req, _ := http.NewRequest(http.MethodPut, ts.URL, strings.NewReader("v1"))
	errRewind := fmt.Errorf("cannot rewind")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errRewind }
	_, err := c.Do(req)
	if !errors.Is(err, errRewind) || s.n.Load() != 1 {
		t.Fatalf("err %v after %d requests; want the GetBody error after 1", err, s.n.Load())
	}
}

// More malformed and extreme Retry-After values: what is not
// delay-seconds or an HTTP-date is ignored (the policy's 1 ms), anything
// huge is capped at the engine's MaxRetryAfter (5 min), a past date is 0.
func TestRetryAfterExtremes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			v    string
			want time.Duration
		}{
			{"1.5", time.Millisecond}, {"+5", time.Millisecond}, {"0x10", time.Millisecond}, {"1e3", time.Millisecond},
			{"-99999999999999999999999", time.Millisecond}, {"99999999", 5 * time.Minute},
			{"18446744073709551615", 5 * time.Minute}, {"18446744073709551616", 5 * time.Minute},
			{"Fri, 31 Dec 9999 23:59:59 GMT", 5 * time.Minute}, {"Thu, 01 Jan 1970 00:00:00 GMT", time.Millisecond},
			{"Sunday, 06-Nov-94 08:49:37 GMT", time.Millisecond}, {"Sun Nov  6 08:49:37 1994", time.Millisecond},
			{"Fri, 31 Dec 9999 23:59:59 GMT; x", time.Millisecond},
		} {
			f := &fake{answer: func(n int) *http.Response {
				if n == 1 {
					return status(429, tc.v)
				}
				return status(200, "")
			}}
			rt, _ := reboundhttp.New(f, rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: rebound.NoJitter})
			req, _ := http.NewRequest(http.MethodGet, "http://svc/x", nil)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got := f.times[1].Sub(f.times[0]); got != tc.want {
				t.Errorf("Retry-After %q: waited %v, want %v", tc.v, got, tc.want)
			}
		}
	})
}

// Failed responses with short bodies are drained, so every retry reuses
// the one connection: the server sees one connection for five attempts.
func TestRetriesReuseTheConnection(t *testing.T) {
	s := &server{statuses: []int{503, 502, 504, 429}}
	var conns atomic.Int32
	ts := httptest.NewUnstartedServer(s)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit)}
	if code, body := get(t, c, ts.URL); code != 200 || body != "200" {
		t.Fatalf("got %d %q", code, body)
	}
	if s.n.Load() != 5 || conns.Load() != 1 {
		t.Fatalf("%d requests over %d connections, want 5 over 1", s.n.Load(), conns.Load())
	}
}

// allowN is a Breaker that admits n attempts, then refuses every one.
type allowN struct{ n atomic.Int32 }

func (b *allowN) Allow() (func(error), error) {
	if b.n.Add(-1) < 0 {
		return nil, rebound.ErrBreakerOpen
	}
	return func(error) {}, nil
}

type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeTracker) Close() error { b.closed.Store(true); return nil }

// A host's breaker (WithHostOptions) that refuses the retry returns the
// held failed response, readable; one that refuses the first attempt
// sends nothing, closes the request's body and says so.
func TestHostBreakerRefuses(t *testing.T) {
	s := &server{statuses: []int{503}}
	ts := start(t, s)
	b := &allowN{}
	b.n.Store(1)
	c := &http.Client{Transport: newTransport(t, nil, fast, fastLimit, reboundhttp.WithHostOptions(func(string) []rebound.Option {
		return []rebound.Option{rebound.WithBreaker(b)}
	}))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound: a refusal that waits ends here
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("retry refused: %v, want the held 503", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(got) != "503" {
		t.Fatalf("retry refused: %d %q, want the held 503 unread", resp.StatusCode, got)
	}
	body := &closeTracker{Reader: strings.NewReader("v")}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPut, ts.URL, body)
	if _, err := c.Do(req); !errors.Is(err, rebound.ErrBreakerOpen) || !body.closed.Load() || s.n.Load() != 1 {
		t.Fatalf("first attempt refused: %v, body closed %v, server saw %d; want ErrBreakerOpen, closed, 1", err, body.closed.Load(), s.n.Load())
	}
}

// A POST that times out awaiting its response (outcome unknown) is sent
// once; a POST with Body http.NoBody has nothing to rewind and is treated
// as any POST without a key: a 503 is returned, not retried.
func TestPOSTResponseTimeoutAndNoBody(t *testing.T) {
	var posts atomic.Int32
	ts := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		posts.Add(1)
		if r.URL.Path == "/slow" {
			<-r.Context().Done() // applied; the answer never comes
			return
		}
		w.WriteHeader(503)
	}))
	base := &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond}
	t.Cleanup(base.CloseIdleConnections)
	c := &http.Client{Transport: newTransport(t, base, fast, fastLimit)}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/slow", strings.NewReader("order"))
	if _, err := c.Do(req); err == nil || posts.Load() != 1 {
		t.Fatalf("timed-out POST: %v, applied %d times; want an error, once", err, posts.Load())
	}
	req, _ = http.NewRequest(http.MethodPost, ts.URL, http.NoBody)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || posts.Load() != 2 {
		t.Fatalf("NoBody POST: %d, applied %d in all; want 503, 2", resp.StatusCode, posts.Load())
	}
}

// net/http puts a server's GOAWAY debug data in its error text: a server
// that processed a POST and then sent GOAWAY with debug data naming an
// "unprocessed" error must not make NeverSent true and the POST resent.
func TestGOAWAYDebugDataCannotForgeNeverSent(t *testing.T) {
	forged := errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug="http2: client conn not usable"`)
	if reboundhttp.NeverSent(forged) {
		t.Errorf("NeverSent(%q) = true: the server's debug data decided it", forged)
	}
	var calls atomic.Int32
	rt := newTransport(t, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.ReadAll(r.Body)
		r.Body.Close()
		calls.Add(1)
		return nil, forged
	}), fast, fastLimit)
	req, _ := http.NewRequest(http.MethodPost, "http://h.example/", strings.NewReader("order"))
	if _, err := rt.RoundTrip(req); err == nil || calls.Load() != 1 {
		t.Fatalf("POST after a forged GOAWAY: %v, sent %d times; want an error, once", err, calls.Load())
	}
	for _, ok := range []string{
		"http2: client conn not usable",
		"http2: Transport: cannot retry err [http2: Transport received Server's graceful shutdown GOAWAY] after Request.Body was written; define Request.GetBody to avoid this error",
	} {
		if !reboundhttp.NeverSent(errors.New(ok)) {
			t.Errorf("NeverSent(%q) = false, want true", ok)
		}
	}
}

// A TLS record with a bad header after the handshake (a peer or middlebox
// answering garbage once the POST was processed) is a tls.RecordHeaderError
// like a failed handshake's: it must not make the POST look never sent.
func TestTLSRecordErrorAfterHandshakeIsNotNeverSent(t *testing.T) {
	var posts atomic.Int32
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		posts.Add(1)
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*tls.Conn).NetConn().Write([]byte{0x17, 0x03, 0x01, 0x00, 0x01, 0x00}) // a record of version 0x0301
	}))
	t.Cleanup(ts.Close)
	base := ts.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	c := &http.Client{Transport: newTransport(t, base, fast, fastLimit)}
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("order"))
	_, err := c.Do(req)
	if err == nil || posts.Load() != 1 {
		t.Fatalf("POST answered with a bad TLS record: %v, applied %d times; want an error, once", err, posts.Load())
	}
}
