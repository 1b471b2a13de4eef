package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
)

// This file is the framework side of the example: how an RPC framework turns
// a registry instance into a cluster.Invoker, and how it tells failback which
// failures are worth a retry. Everything else in the program is scaffolding
// around it.
//
// The wire protocol is deliberately small: an invocation of method M with
// one argument is POST http://ip:port/M with the argument as a JSON body and
// the invocation's attachments as request headers; a 2xx answer carries the
// result as JSON.

// maxBody bounds what the invoker reads of a response body.
const maxBody = 1 << 16

// CallError is a failed call to one provider. Status is the HTTP status of
// the answer, or 0 when no answer came (refused, reset, timed out).
type CallError struct {
	Target string
	Method string
	Status int
	// RetryAfter is the delay the provider asked for in a Retry-After
	// header, if any.
	RetryAfter time.Duration
	Err        error
}

func (e *CallError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("call %s on %s: %v", e.Method, e.Target, e.Err)
	}
	return fmt.Sprintf("call %s on %s: HTTP %d: %v", e.Method, e.Target, e.Status, e.Err)
}

// Unwrap returns the underlying error (a transport error, or the provider's
// message).
func (e *CallError) Unwrap() error { return e.Err }

// statusOf returns the HTTP status carried by err, 0 if none.
func statusOf(err error) int {
	if ce, ok := errors.AsType[*CallError](err); ok {
		return ce.Status
	}
	return 0
}

// invokerOptions configure the HTTP invokers of a consumer.
type invokerOptions struct {
	// timeout bounds each call (connect, send, answer), on top of the
	// caller's context. An expiry of this timeout is retryable; the
	// caller's own cancellation is not.
	timeout time.Duration
	// maxConns is the number of idle keep-alive connections kept per
	// provider.
	maxConns int
}

// dialHTTP returns the dial function of the consumer's
// RegistryDirectory: one httpInvoker, with its own connection pool, per
// registry instance. Dialling opens no connection, so it never blocks the
// registry push that calls it.
func dialHTTP(o invokerOptions) func(subscriber.Instance) (cluster.Invoker, error) {
	return func(in subscriber.Instance) (cluster.Invoker, error) {
		if in.IP == "" || in.Port == 0 || in.Port > 65535 {
			return nil, fmt.Errorf("instance %q has no usable address %s:%d", in.ID, in.IP, in.Port)
		}
		target := net.JoinHostPort(in.IP, strconv.FormatUint(in.Port, 10))
		tr := &http.Transport{
			Proxy:                 nil, // providers are reached directly
			DialContext:           (&net.Dialer{Timeout: o.timeout}).DialContext,
			MaxIdleConnsPerHost:   max(o.maxConns, 1),
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: o.timeout,
		}
		return &httpInvoker{
			target:  target,
			name:    in.Metadata["provider"],
			tr:      tr,
			client:  &http.Client{Transport: tr},
			timeout: o.timeout,
		}, nil
	}
}

// httpInvoker calls one provider. It is safe for concurrent use. Close
// releases its keep-alive connections; the RegistryDirectory calls it when
// the provider's instance disappears from the registry.
type httpInvoker struct {
	target  string
	name    string // the provider's name from its registry metadata, for display
	tr      *http.Transport
	client  *http.Client
	timeout time.Duration

	mu     sync.Mutex
	closed bool
}

// Target implements cluster.Invoker.
func (c *httpInvoker) Target() string { return c.target }

// Close implements io.Closer. A call still running keeps its connection
// until it ends, then closes it (see Invoke). Idempotent.
func (c *httpInvoker) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.tr.CloseIdleConnections()
	return nil
}

// Invoke implements cluster.Invoker: POST http://target/Method with
// inv.Args[0] as JSON. Its errors say what a retry could fix:
//
//   - no answer (connection refused or reset, EOF, this call's own timeout):
//     rebound.Transient, wrapping the transport error;
//   - HTTP 5xx, 408 and 429: rebound.Transient, and wrapped with
//     rebound.RetryAfter when the answer carries a Retry-After header, so
//     that failback waits at least that long;
//   - any other non-2xx status (4xx: the request itself is wrong), a
//     request that cannot be encoded: rebound.Permanent, never retried;
//   - the caller's context done: its error, which failback never queues.
func (c *httpInvoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	fail := func(status int, err error) *CallError {
		return &CallError{Target: c.target, Method: inv.Method, Status: status, Err: err}
	}
	if inv.Method == "" || strings.ContainsAny(inv.Method, "/?#") || len(inv.Args) != 1 {
		return nil, rebound.Permanent(fail(0, fmt.Errorf("bad invocation: method %q with %d arguments, want a plain method name and 1 argument", inv.Method, len(inv.Args))))
	}
	body, err := json.Marshal(inv.Args[0])
	if err != nil {
		return nil, rebound.Permanent(fail(0, fmt.Errorf("encode argument: %w", err)))
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, "http://"+c.target+"/"+inv.Method, bytes.NewReader(body))
	if err != nil {
		return nil, rebound.Permanent(fail(0, err))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range inv.Attachments {
		req.Header.Set(k, v)
	}

	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up: not a provider failure.
			return nil, fmt.Errorf("call %s on %s: %w", inv.Method, c.target, context.Cause(ctx))
		}
		return nil, classifyTransport(fail(0, err))
	}
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	// Reading to EOF hands the connection back to the pool before Close.
	_ = resp.Body.Close()
	c.releaseIfClosed()

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if readErr != nil {
			// The provider may have processed the call: retrying may
			// duplicate it, which at-least-once delivery accepts.
			if ctx.Err() != nil {
				return nil, fmt.Errorf("call %s on %s: %w", inv.Method, c.target, context.Cause(ctx))
			}
			return nil, classifyTransport(fail(code, readErr))
		}
		return json.RawMessage(data), nil
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		ce := fail(code, errors.New(message(data, resp.Status)))
		var err error = rebound.Transient(ce)
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			ce.RetryAfter = d
			err = rebound.RetryAfter(d, err)
		}
		return nil, err
	default:
		return nil, rebound.Permanent(fail(code, errors.New(message(data, resp.Status))))
	}
}

// releaseIfClosed closes the pool's idle connections if the invoker was
// closed while a call was running, so that the connection that call used
// does not outlive the invoker.
func (c *httpInvoker) releaseIfClosed() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		c.tr.CloseIdleConnections()
	}
}

// classifyTransport marks a call that got no (complete) answer. Refused
// and reset connections, EOFs and timeouts are what a crashed or
// restarting provider produces: transient. Anything else (a malformed
// answer, say) is left to failback's classifier, which retries network
// errors and nothing else.
func classifyTransport(ce *CallError) error {
	err := ce.Err
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return rebound.Transient(ce)
	}
	return ce
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110, section 10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// message extracts a provider's error message: {"error": "..."} or the
// status line.
func message(body []byte, status string) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return status
}
