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
// observers, metrics, traces. A budget, throttle, limiter or breaker given
// here is shared by all hosts. Several WithOptions add up.
func WithOptions(opts ...rebound.Option) Option {
	return optionFunc(func(t *Transport) error {
		t.shared = append(t.shared, opts...)
		return nil
	})
}

// WithHostOptions gives each host a Retrier of its own, with the options
// perHost returns (after WithOptions'), called once per host with no lock
// held (again at the next request if the engine rejected an option). Do
// not use it for an unbounded set of hosts.
func WithHostOptions(perHost func(host string) []rebound.Option) Option {
	return optionFunc(func(t *Transport) error {
		if perHost == nil {
			return &rebound.ArgumentError{Func: "reboundhttp.WithHostOptions", Arg: "perHost", Reason: "must not be nil (omit the option)"}
		}
		t.perHost = perHost
		return nil
	})
}

// WithClassifier sets which responses (err nil) and errors (resp nil) are
// worth another attempt: retryable gets def, the default's verdict (429,
// 502, 503, 504, network errors). It cannot make an unsafe request retried;
// it is called concurrently.
func WithClassifier(retryable func(resp *http.Response, err error, def bool) bool) Option {
	return optionFunc(func(t *Transport) error {
		if retryable == nil {
			return &rebound.ArgumentError{Func: "reboundhttp.WithClassifier", Arg: "retryable", Reason: "must not be nil (omit the option for the default)"}
		}
		t.classify = func(resp *http.Response, err error) bool {
			return retryable(resp, err, defaultClassifier(resp, err))
		}
		return nil
	})
}

// WithIdempotencyKey gives each request without an Idempotency-Key (or
// X-Idempotency-Key) one from newKey, the same on every attempt. This makes
// a POST safe to retry for a server that deduplicates by the key. A nil
// newKey draws 128 random bits; an empty key means none.
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
