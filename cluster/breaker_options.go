package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/nilness"
)

// Breaker defaults, filled in where the Settings leave a field zero.
const (
	defaultMaxEjected          = 0.5
	defaultConsecutiveFailures = 5                // as Envoy's consecutive_5xx
	defaultOpenTimeout         = 30 * time.Second // as Envoy's base_ejection_time
)

// BreakerOpenError is the error of a call that no breaker let through:
// List returns it when the breaker of every listed target is open (and the
// ejection share, WithMaxEjected, allows them all out), and an Invoker that
// List returned returns it when its breaker refused the call after all (two
// calls raced for one half-open probe). It wraps ErrNoInvokers, so a
// caller that retries an empty directory retries this too, and, for a
// refusal by one breaker, gobreaker.ErrOpenState or ErrTooManyRequests.
type BreakerOpenError struct {
	// Target is the refusing invoker's Target; "" when List refused.
	Target string
	// Until is the earliest time a breaker is expected to let a probe
	// through (the earliest end of an open timeout). A retry that waits
	// until then is not an attempt wasted on a breaker.
	Until time.Time
	// Err is gobreaker's refusal (ErrOpenState, ErrTooManyRequests), nil
	// when List refused.
	Err error
}

func (e *BreakerOpenError) Error() string {
	if e.Target != "" {
		return fmt.Sprintf("cluster: breaker of %s refused the call (%v); next probe at %s", e.Target, e.Err, e.Until.Format(time.RFC3339Nano))
	}
	return "cluster: every target's breaker is open; next probe at " + e.Until.Format(time.RFC3339Nano)
}

// Unwrap returns ErrNoInvokers and Err.
func (e *BreakerOpenError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNoInvokers}
	}
	return []error{ErrNoInvokers, e.Err}
}

// BreakerEvent is a breaker's state change: the Detail of the
// rebound.EventStateChanged that a BreakerDirectory gives the observers of
// WithBreakerObserver. They are called once the breaker's lock is
// released, on the goroutine whose call caused the change, one event at a
// time, in order.
type BreakerEvent struct {
	Target   string
	From, To gobreaker.State
	// At is when the directory saw the change (gobreaker changes state
	// lazily: open becomes half-open at the first look after the
	// timeout).
	At time.Time
}

// BreakerStatus is one target's breaker, as BreakerDirectory.Breakers
// reports it.
type BreakerStatus struct {
	Target string
	State  gobreaker.State
	// Since is when the breaker entered State (when the directory first
	// saw the target, for a breaker that has always been closed).
	Since time.Time
	// Until is when an open breaker lets a probe through; zero otherwise.
	Until time.Time
	// Ejected reports whether the target was out of selection at the last
	// List: its breaker open (or half-open with its probes taken) within
	// the ejection share. An open breaker beyond the share is not ejected:
	// its target is called anyway.
	Ejected bool
	Counts  gobreaker.Counts
}

type breakerConfig struct {
	settings func(target string) gobreaker.Settings
	share    float64
	failures uint32
	timeout  time.Duration
	maxOpen  time.Duration // 0: the open timeout (no growth)
	failure  func(error) bool
	obs      []rebound.Observer
	logger   *zap.Logger
	mp       metric.MeterProvider
	errs     []error
}

func (c *breakerConfig) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster." + fn, Arg: arg, Reason: reason})
}

// WithBreakerSettings sets the factory of each target's gobreaker
// Settings, called when the directory first lists the target. Zero fields
// take the directory's defaults: Name (the target), ReadyToTrip, Timeout
// and IsSuccessful (see docs/breaker.md for the differences from
// gobreaker). Default: gobreaker.Settings{}; a nil factory is an error.
func WithBreakerSettings(factory func(target string) gobreaker.Settings) Option {
	return breakerOption("WithBreakerSettings", func(c *breakerConfig) {
		if factory == nil {
			c.bad("WithBreakerSettings", "factory", "must not be nil: it returns the gobreaker.Settings of a target")
			return
		}
		c.settings = factory
	})
}

// WithMaxEjected sets the largest share of a service's targets that open
// breakers may keep out at once, as Envoy's max_ejection_percent. Beyond
// it, open targets are called anyway (see docs/breaker.md). Default 0.5;
// share must be in (0, 1].
func WithMaxEjected(share float64) Option {
	return breakerOption("WithMaxEjected", func(c *breakerConfig) {
		if !(share > 0 && share <= 1) {
			c.bad("WithMaxEjected", "share", fmt.Sprintf("must be in (0, 1], got %v", share))
			return
		}
		c.share = share
	})
}

// WithConsecutiveFailures sets how many consecutive failures trip a
// breaker whose Settings have no ReadyToTrip. Default 5; n must be in
// [1, math.MaxUint32].
func WithConsecutiveFailures(n int) Option {
	return breakerOption("WithConsecutiveFailures", func(c *breakerConfig) {
		if n <= 0 || uint64(n) > math.MaxUint32 { // uint64: an int may be 32 bits
			c.bad("WithConsecutiveFailures", "n", fmt.Sprintf("must be in [1, %d], got %d", uint32(math.MaxUint32), n))
			return
		}
		c.failures = uint32(n)
	})
}

// WithOpenTimeout sets how long a tripped breaker whose Settings have no
// Timeout stays open before a probe. Default 30 s; d must be > 0.
// math.MaxInt64 means until the process restarts.
func WithOpenTimeout(d time.Duration) Option {
	return breakerOption("WithOpenTimeout", func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.timeout = d
	})
}

// WithMaxOpenTimeout lets the open timeout grow with consecutive
// ejections up to d, as Envoy's max_ejection_time (see docs/breaker.md).
// Default: no growth. d must be > 0; math.MaxInt64 means no limit.
func WithMaxOpenTimeout(d time.Duration) Option {
	return breakerOption("WithMaxOpenTimeout", func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithMaxOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.maxOpen = d
	})
}

// WithBreakerClassifier sets which errors count as failures for breakers
// whose Settings have no IsSuccessful. Behind failback, pass its
// WithRetryable classifier. Default: DefaultBreakerFailure; nil is an
// error.
func WithBreakerClassifier(failure func(error) bool) Option {
	return breakerOption("WithBreakerClassifier", func(c *breakerConfig) {
		if failure == nil {
			c.bad("WithBreakerClassifier", "failure", "must not be nil: it reports whether an error means the provider failed")
			return
		}
		c.failure = failure
	})
}

// WithBreakerObserver adds o as an observer of the breakers' state
// changes (each event's Detail is a BreakerEvent). Several add up; a nil
// o is ignored. Default: none.
func WithBreakerObserver(o rebound.Observer) Option {
	if nilness.Is(o) {
		return nil
	}
	return breakerOption("WithBreakerObserver", func(c *breakerConfig) { c.obs = append(c.obs, o) })
}

// WithBreakerMeterProvider records rebound.breaker.targets{state} and
// rebound.breaker.transitions{state}, read when the reader collects.
// Close unregisters them. Default (and nil): no metrics.
func WithBreakerMeterProvider(mp metric.MeterProvider) Option {
	return breakerOption("WithBreakerMeterProvider", func(c *breakerConfig) { c.mp = mp })
}

// DefaultBreakerFailure is the classifier of WithBreakerClassifier's
// default: an error counts as a failure of the provider when it is marked
// rebound.Transient, is context.DeadlineExceeded (the attempt's own
// timeout), io.ErrUnexpectedEOF, net.ErrClosed or a net.Error (syscall
// errors such as ECONNREFUSED included); nil, rebound.Permanent,
// context.Canceled (the caller gave up) and every other error (a business
// answer) do not.
func DefaultBreakerFailure(err error) bool {
	switch {
	case err == nil, rebound.IsPermanent(err), errors.Is(err, context.Canceled):
		return false
	case rebound.IsTransient(err), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}
