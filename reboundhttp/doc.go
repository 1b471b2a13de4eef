// Package reboundhttp retries net/http requests through the rebound engine.
//
// A Transport wraps any http.RoundTripper. Each logical request is one
// rebound.Retrier.Do of its host's Retrier, so the policy, budget,
// throttle, limiter, breaker, observers, metrics and traces are the
// engine's, and no retry timing is decided here:
//
//	rt, err := reboundhttp.New(http.DefaultTransport, rebound.Policy{},
//		reboundhttp.WithOptions(rebound.WithMaxAttempts(4)))
//	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
//
// What is retried: a request that is safe to repeat (an idempotent method,
// or an Idempotency-Key header: WithIdempotencyKey adds one) after a 429,
// 502, 503 or 504 or a network error; any request, a POST included, after
// an error proving the server never saw it (a failed dial or TLS
// handshake, an HTTP/2 REFUSED_STREAM or a stream above a GOAWAY's last
// stream ID). A POST whose outcome is unknown is never sent twice. Other
// 4xx, redirects and successes return at once (http.Client follows
// redirects above the transport: each hop is a request of its own).
//
// A retried response is drained (at most 4 KiB, 50 ms) and closed; when
// the engine stops, the last response is returned, body unread. Every wait
// ends with the request's context. Retry-After is honoured up to
// Policy.MaxRetryAfter.
//
// A Transport is safe for concurrent use. See docs/http.md.
package reboundhttp
