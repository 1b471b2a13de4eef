package reboundhttp

import (
	"crypto/rand"
	"net/http"

	"github.com/rebound-go/rebound"
)

// An Option configures New. A nil Option is ignored; a bad value makes New
// return an *rebound.ArgumentError naming the option and the rule.
type Option interface {
	apply(*Transport) error
}

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithOptions gives every host's Retrier the engine options opts:
// observers (rebound.WithObserver), metrics (rebound.WithMeterProvider),
// traces (rebound.WithTracerProvider: a span per attempt, whose context
// the base transport gets). A budget, throttle, limiter or breaker given
// here is shared by all hosts; use WithHostOptions for one per host. Use
// WithClassifier rather than rebound.WithClassifier, which would see this
// package's errors (*StatusError, the base transport's). Several
// WithOptions add up.
func WithOptions(opts ...rebound.Option) Option {
	return optionFunc(func(t *Transport) error {
		t.shared = append(t.shared, opts...)
		return nil
	})
}

// WithHostOptions calls perHost once for each host (req.URL.Host, port
// included), on the host's first request and without any lock held, and
// gives that host's Retrier the options it returns after those of
// WithOptions: typically a RetryBudget, an AdaptiveThrottle, a
// rate.Limiter and a breaker of the host's own. The Retrier is kept for
// the Transport's life: give a Transport that reaches an unbounded set of
// hosts (user-supplied URLs) no WithHostOptions (its hosts share one
// Retrier). Concurrent first requests to a host wait for its one call. An
// option the engine rejects, or a panic, fails the host's requests with an
// *rebound.ArgumentError.
func WithHostOptions(perHost func(host string) []rebound.Option) Option {
	return optionFunc(func(t *Transport) error {
		if perHost == nil {
			return &rebound.ArgumentError{Func: "reboundhttp.WithHostOptions", Arg: "perHost", Reason: "must not be nil (omit the option)"}
		}
		t.perHost = perHost
		return nil
	})
}

// WithClassifier replaces DefaultClassifier: retryable reports whether a
// response (err nil) or an error (resp nil) is worth another attempt. It
// cannot make an unsafe request retried: a request that is not safe to
// repeat (see RoundTrip) is retried only after an error for which both
// NeverSent and retryable report true. It is called from the goroutine of
// RoundTrip, concurrently for concurrent requests.
func WithClassifier(retryable func(resp *http.Response, err error) bool) Option {
	return optionFunc(func(t *Transport) error {
		if retryable == nil {
			return &rebound.ArgumentError{Func: "reboundhttp.WithClassifier", Arg: "retryable", Reason: "must not be nil (omit the option for DefaultClassifier)"}
		}
		t.classify = retryable
		return nil
	})
}

// WithIdempotencyKey gives each logical request that carries neither
// Idempotency-Key nor X-Idempotency-Key an Idempotency-Key from newKey
// (nil: 128 random bits in hex), the same on every attempt of that
// request, which makes a POST or PATCH safe to retry for a server that
// deduplicates by the key; an empty key from newKey is no key (the request
// is sent as it is). The caller's request is not changed: the
// attempts send a copy (one header clone per request).
func WithIdempotencyKey(newKey func() string) Option {
	return optionFunc(func(t *Transport) error {
		if newKey == nil {
			newKey = randomKey
		}
		t.newKey = newKey
		return nil
	})
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	const hex = "0123456789abcdef"
	var s [32]byte
	for i, c := range b {
		s[2*i], s[2*i+1] = hex[c>>4], hex[c&15]
	}
	return string(s[:])
}
