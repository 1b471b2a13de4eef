package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// Breaker defaults, filled in where the Settings leave a field zero.
const (
	defaultMaxEjected          = 0.5
	defaultConsecutiveFailures = 5                // as Envoy's consecutive_5xx
	defaultOpenTimeout         = 30 * time.Second // as Envoy's base_ejection_time
)

// BreakerOpenError is the error of a call that no breaker let through. It
// wraps ErrNoInvokers and, for one breaker's refusal, gobreaker's error.
type BreakerOpenError struct {
	// Target is the refusing target; empty when List refused.
	Target string
	// Until is the earliest time a breaker lets a probe through.
	Until time.Time
	// Err is gobreaker's refusal; nil when List refused.
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
// rebound.EventStateChanged given to WithBreakerSettings' observers. They
// run one event at a time, in order, with no lock held.
type BreakerEvent struct {
	Target   string
	From, To gobreaker.State
	// At is when the directory saw the change.
	At time.Time
}

// BreakerStatus is one target's breaker, as Open reports it.
type BreakerStatus struct {
	Target string
	State  gobreaker.State
	// Since is when the breaker entered State.
	Since time.Time
	// Until is when an open breaker lets a probe through.
	Until time.Time
	// Ejected reports whether the last List left the target out. An open
	// breaker beyond the share is called anyway.
	Ejected bool
	Counts  gobreaker.Counts
}

type breakerConfig struct {
	settings      func(target string) gobreaker.Settings
	share         float64
	failures      uint32
	timeout       time.Duration
	maxOpen       time.Duration // 0: the open timeout (no growth)
	failure       func(error) bool
	customFailure bool               // set by the tests' classifier: a nil error may be a failure
	obs           []rebound.Observer // WithBreakerSettings' rebound.WithObserver
	logger        *zap.Logger
	mp            metric.MeterProvider // WithBreakerSettings' rebound.WithMeterProvider
	errs          []error
}

func (c *breakerConfig) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster." + fn, Arg: arg, Reason: reason})
}

// WithBreakerSettings sets the factory of each target's gobreaker Settings.
// Zero fields take the defaults: Name is the target, ReadyToTrip 5
// consecutive failures, Timeout 30 s. IsSuccessful's default is in
// docs/breaker.md. A nil factory is an error. opts take rebound.WithObserver
// (state changes; each event's Detail is a BreakerEvent) and
// WithMeterProvider (states and transitions, until Close) only.
func WithBreakerSettings(factory func(target string) gobreaker.Settings, opts ...rebound.Option) Option {
	return breakerOption("WithBreakerSettings", func(c *breakerConfig) {
		if factory == nil {
			c.bad("WithBreakerSettings", "factory", "must not be nil: it returns the gobreaker.Settings of a target")
			return
		}
		if _, err := rebound.NewRetrier(rebound.Policy{}, opts...); err != nil {
			c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster.WithBreakerSettings", Arg: "opts", Reason: "holds a bad option", Err: err})
			return
		}
		for _, o := range opts {
			if o != nil && !admit.Observing(o) {
				c.bad("WithBreakerSettings", "opts", "may hold only rebound.WithObserver and rebound.WithMeterProvider")
				return
			}
		}
		c.settings = factory
		e := admit.Engine(opts)
		c.obs = append(c.obs, admit.Observers[rebound.Observer](e)...)
		if e.MeterProvider != nil {
			c.mp = e.MeterProvider
		}
	})
}

// WithMaxEjected sets the largest share of targets that open breakers keep
// out. Beyond it, open targets are called anyway. Default 0.5; share must
// be in (0, 1].
func WithMaxEjected(share float64) Option {
	return breakerOption("WithMaxEjected", func(c *breakerConfig) {
		if !(share > 0 && share <= 1) {
			c.bad("WithMaxEjected", "share", fmt.Sprintf("must be in (0, 1], got %v", share))
			return
		}
		c.share = share
	})
}

// WithMaxOpenTimeout lets the open time grow with consecutive ejections,
// up to d. Default: no growth. d must be > 0.
func WithMaxOpenTimeout(d time.Duration) Option {
	return breakerOption("WithMaxOpenTimeout", func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithMaxOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.maxOpen = d
	})
}

// defaultFailure is the default classification: an error is a failure
// of the provider when it is rebound.Transient, context.DeadlineExceeded,
// io.ErrUnexpectedEOF, net.ErrClosed or a net.Error; nil,
// rebound.Permanent, context.Canceled and business answers are not.
func defaultFailure(err error) bool {
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
