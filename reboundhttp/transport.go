package reboundhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rebound-go/rebound"
)

// drainLimit bounds how much of a failed response's body is read before it
// is closed: a body that ends within it leaves its connection reusable, a
// longer one (or a never-ending stream) has its connection closed.
const drainLimit = 4 << 10

// drainTime bounds how long a failed response's body is read: a body that
// trickles is closed (its connection with it) rather than hold the retry.
const drainTime = 50 * time.Millisecond

// idempotencyKeyHeader is the header WithIdempotencyKey sets; it and
// X-Idempotency-Key make a request safe to retry whatever its method.
const idempotencyKeyHeader = "Idempotency-Key"

// Transport is an http.RoundTripper that retries requests through the
// rebound engine (see New). It is safe for concurrent use.
type Transport struct {
	base     http.RoundTripper
	policy   rebound.Policy
	shared   []rebound.Option
	perHost  func(host string) []rebound.Option
	classify func(*http.Response, error) bool
	newKey   func() string

	all   *rebound.Retrier // every host's, without WithHostOptions
	mu    sync.RWMutex
	hosts map[string]*host // with WithHostOptions: one per host, built on its first request, never evicted

	pool sync.Pool // of *call
}

// New returns a Transport that sends requests with base (nil:
// http.DefaultTransport) and retries them with policy p. The zero Policy
// retries until the request's context ends; bound it with
// WithOptions(rebound.WithMaxAttempts(n)). A
// bad p or option is a *rebound.ArgumentError.
func New(base http.RoundTripper, p rebound.Policy, opts ...Option) (*Transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, policy: p, classify: defaultClassifier, hosts: map[string]*host{}}
	for _, o := range opts {
		if o != nil {
			if err := o.apply(t); err != nil {
				return nil, err
			}
		}
	}
	if _, err := rebound.NewRetrier(p); err != nil {
		return nil, &rebound.ArgumentError{Func: "reboundhttp.New", Arg: "p", Reason: "breaks a Policy rule", Err: err}
	}
	var err error
	if t.all, err = rebound.NewRetrier(p, t.shared...); err != nil {
		return nil, &rebound.ArgumentError{Func: "reboundhttp.New", Arg: "WithOptions", Reason: "has an option the engine rejects", Err: err}
	}
	t.pool.New = func() any { c := &call{t: t}; c.fn = c.attempt; return c }
	return t, nil
}

// host is a host's Retrier or the error building it, set when ready closes.
type host struct {
	ready    chan struct{}
	r        *rebound.Retrier
	err      error
	rejected bool // err is the engine's: not kept
}

// retrier returns name's Retrier, building it on first use: one request
// builds it (perHost called without the lock: it is the user's code), the
// others for that host wait for it or for ctx.
func (t *Transport) retrier(ctx context.Context, name string) (*rebound.Retrier, error) {
	if t.perHost == nil {
		return t.all, nil
	}
	t.mu.RLock()
	h := t.hosts[name]
	t.mu.RUnlock()
	if h == nil {
		t.mu.Lock()
		build := false
		if h = t.hosts[name]; h == nil {
			h, build = &host{ready: make(chan struct{})}, true
			t.hosts[name] = h
		}
		t.mu.Unlock()
		if build {
			t.build(name, h)
		}
	}
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.rejected {
		// The engine rejected the options: a limiter shared through
		// WithOptions may grant again later, so the next request builds
		// the host's Retrier again.
		t.mu.Lock()
		if t.hosts[name] == h {
			delete(t.hosts, name)
		}
		t.mu.Unlock()
	}
	return h.r, h.err
}

// build makes h's Retrier and closes h.ready, even if perHost panics.
func (t *Transport) build(name string, h *host) {
	defer close(h.ready)
	h.err = &rebound.ArgumentError{Func: "reboundhttp.WithHostOptions", Arg: "perHost", Reason: "panicked for host " + name}
	opts := t.shared
	if t.perHost != nil {
		opts = append(append([]rebound.Option(nil), t.shared...), t.perHost(name)...)
	}
	h.r, h.err = rebound.NewRetrier(t.policy, opts...)
	if h.err != nil {
		h.rejected = true
		h.err = &rebound.ArgumentError{Func: "reboundhttp.WithHostOptions", Arg: "host " + name, Reason: "gave an option the engine rejects", Err: h.err}
	}
}

// RoundTrip sends req, retries it through the engine while it is safe
// and worth it, and returns the last response. Safe: an idempotent method,
// an Idempotency-Key or X-Idempotency-Key header, or an error proving the
// server never saw it. A body is sent again only through GetBody.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil || req.URL == nil {
		return nil, &rebound.ArgumentError{Func: "reboundhttp.Transport.RoundTrip", Arg: "req", Reason: "must be non-nil with a non-nil URL"}
	}
	r, err := t.retrier(req.Context(), req.URL.Host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if t.newKey != nil && !hasKey(req.Header) {
		if key := t.newKey(); key != "" {
			req = withKey(req, key)
		}
	}
	c := t.pool.Get().(*call)
	c.req, c.safe = req, safeToRepeat(req)
	err = r.Do(req.Context(), c.fn)
	resp, held, sent := c.resp, c.held, c.sent
	*c = call{t: t, fn: c.fn}
	t.pool.Put(c)
	if resp != nil { // not retried: a success, or a 5xx returned as a permanent error
		return resp, nil
	}
	if sent == 0 { // refused before any attempt (context, breaker, throttle)
		closeBody(req)
	}
	if held != nil {
		if req.Context().Err() == nil {
			return held, nil // the engine stopped: the caller sees the server's answer
		}
		drainClose(req.Context(), held)
	}
	return nil, err
}

// CloseIdleConnections closes the base transport's idle connections, if it
// has such a method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// call is one logical request: the state its attempts share. Pooled, so
// that the success path allocates nothing of its own.
type call struct {
	t    *Transport
	fn   func(context.Context) error // c.attempt, made once per pooled call
	req  *http.Request
	safe bool
	sent int            // attempts that reached the base transport
	resp *http.Response // the response that ends the call
	held *http.Response // the last failed response, held until the engine decides
}

// attempt is the operation the engine runs: one round trip.
func (c *call) attempt(ctx context.Context) error {
	if c.held != nil { // the engine chose to retry
		drainClose(ctx, c.held)
		c.held = nil
	}
	req := c.req
	if c.sent > 0 && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return rebound.Permanent(errNoGetBody) // not reached: the first error was made permanent
		}
		body, err := req.GetBody()
		if err != nil {
			return rebound.Permanent(err)
		}
		r2 := *req
		r2.Body = body
		req = &r2
	}
	if ctx != req.Context() { // an attempt span (rebound.WithTracerProvider) in ctx
		req = req.WithContext(ctx)
	}
	c.sent++
	rewindable := c.req.Body == nil || c.req.Body == http.NoBody || c.req.GetBody != nil
	resp, err := c.t.base.RoundTrip(req)
	if err != nil {
		if !rewindable || !c.t.classify(nil, err) || (!c.safe && !neverSent(err)) {
			return rebound.Permanent(err)
		}
		return err
	}
	if !c.worth(resp) || !c.safe || !rewindable {
		c.resp = resp
		if resp.StatusCode >= 500 { // an error for breakers and throttles, not retried
			return rebound.Permanent(&statusError{StatusCode: resp.StatusCode})
		}
		return nil
	}
	c.held = resp
	serr := &statusError{StatusCode: resp.StatusCode}
	if d, ok := retryAfter(resp); ok {
		return rebound.RetryAfter(d, serr)
	}
	return serr
}

// worth classifies resp; if the classifier panics, resp's body is closed
// (its connection not leaked) and the panic goes on.
func (c *call) worth(resp *http.Response) bool {
	ok := false
	defer func() {
		if !ok && resp.Body != nil {
			_ = resp.Body.Close()
		}
	}()
	retry := c.t.classify(resp, nil)
	ok = true
	return retry
}

// drainClose reads at most drainLimit bytes of resp's body, for at most
// drainTime and not past ctx (a Close ends a Read: net/http allows it).
func drainClose(ctx context.Context, resp *http.Response) {
	if resp.Body == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, drainTime)
	defer cancel()
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close(); close(closed) })
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	if !stop() {
		<-closed
	}
	_ = resp.Body.Close()
}

// closeBody closes req's body, as a RoundTripper must even on an error.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
