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
	"github.com/rebound-go/rebound/logging"
)

// Breaker defaults: what a BreakerDirectory fills into the gobreaker
// Settings of a target when the settings factory leaves the field zero.
const (
	// DefaultMaxEjected is the default share of a service's targets whose
	// breakers may keep them out of selection at once (WithMaxEjected).
	DefaultMaxEjected = 0.5
	// DefaultConsecutiveFailures is the number of consecutive failures
	// that trips a breaker whose Settings have no ReadyToTrip
	// (WithConsecutiveFailures), as Envoy's consecutive_5xx.
	DefaultConsecutiveFailures = 5
	// DefaultOpenTimeout is how long a tripped breaker stays open before
	// it lets one probe through (half-open) when its Settings have no
	// Timeout (WithOpenTimeout), as Envoy's base_ejection_time.
	DefaultOpenTimeout = 30 * time.Second
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
// rebound.EventStateChanged a BreakerDirectory emits (and what
// BreakerHooks.StateChanged receives).
type BreakerEvent struct {
	Target   string
	From, To gobreaker.State
	// At is when the directory saw the change (gobreaker changes state
	// lazily: open becomes half-open at the first look after the
	// timeout).
	At time.Time
}

// A BreakerDirectory emits a rebound.EventStateChanged, Detail a
// BreakerEvent, for each state change of a breaker, to the observers of
// WithBreakerObserver; BreakerHooks is the typed adapter. A breaker only
// queues the change under its mutex; the directory calls the observers
// once it is released, from the goroutine whose call caused the change (a List or an Invoke),
// with no lock held, one event at a time in the order of the changes: a
// slow observer delays that call, nothing else (wrap it in a
// rebound.Queue to delay nothing). An observer that panics is recovered
// and logged. Nil fields are skipped.
type BreakerHooks struct {
	StateChanged func(BreakerEvent)
}

// Observe calls StateChanged with e.Detail, if it is a BreakerEvent.
func (h BreakerHooks) Observe(e rebound.Event) {
	if ev, ok := e.Detail.(BreakerEvent); ok && h.StateChanged != nil {
		h.StateChanged(ev)
	}
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

// A BreakerOption configures NewBreakerDirectory.
type BreakerOption interface {
	applyBreaker(*breakerConfig)
}

type breakerOptionFunc func(*breakerConfig)

func (f breakerOptionFunc) applyBreaker(c *breakerConfig) { f(c) }

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
// Settings, called once when the directory first lists the target (and
// again if the target leaves and comes back: its breaker then starts
// closed). Every field is gobreaker's, with its meaning and its defaults,
// except that the directory fills in, when left zero: Name (the target),
// ReadyToTrip (WithConsecutiveFailures), Timeout (WithOpenTimeout) and
// IsSuccessful (the opposite of WithBreakerClassifier). OnStateChange, if
// set, is called like the other hooks, with no lock held (see
// BreakerHooks); ReadyToTrip, IsSuccessful and IsExcluded are not called
// under a lock either. MaxRequests is the number of probes a half-open
// breaker lets through (gobreaker's default, 1: a recovering target gets
// one call, not a burst). A Timeout of math.MaxInt64 never ends; a
// BucketPeriod is raised so that an Interval has at most 1,024 buckets.
// Two differences from gobreaker's CircuitBreaker: closed, a call counts
// in Counts.Requests when it ends rather than when admitted, and the
// open timeout may grow (WithMaxOpenTimeout). Default:
// gobreaker.Settings{} for every target. A nil factory is a
// *rebound.ArgumentError.
func WithBreakerSettings(factory func(target string) gobreaker.Settings) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if factory == nil {
			c.bad("WithBreakerSettings", "factory", "must not be nil: it returns the gobreaker.Settings of a target")
			return
		}
		c.settings = factory
	})
}

// WithMaxEjected sets the largest share of a service's listed targets that
// open breakers may take out of selection at once, as Envoy's
// max_ejection_percent: floor(share × targets) (so with 3 targets and the
// default 0.5, one). When more breakers are open, the ones that opened
// first (from closed: a half-open breaker keeps its place) stay out and
// the others are called anyway (if every provider fails, the fault is
// likely not theirs: keep sending, paced by the caller's budget and
// throttle); a call through an open breaker is then
// made without it and not counted. 1 lets every target out: List then
// returns a *BreakerOpenError when all are open. share must be in (0, 1].
func WithMaxEjected(share float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if !(share > 0 && share <= 1) {
			c.bad("WithMaxEjected", "share", fmt.Sprintf("must be in (0, 1], got %v", share))
			return
		}
		c.share = share
	})
}

// WithConsecutiveFailures sets how many consecutive failures trip a
// breaker whose Settings have no ReadyToTrip. Default
// DefaultConsecutiveFailures (5). n must be in [1, math.MaxUint32]
// (gobreaker counts in a uint32).
func WithConsecutiveFailures(n int) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if n <= 0 || uint64(n) > math.MaxUint32 { // uint64: an int may be 32 bits
			c.bad("WithConsecutiveFailures", "n", fmt.Sprintf("must be in [1, %d], got %d", uint32(math.MaxUint32), n))
			return
		}
		c.failures = uint32(n)
	})
}

// WithOpenTimeout sets how long a tripped breaker whose Settings have no
// Timeout stays open before it lets a probe through (the base of a
// growing timeout, see WithMaxOpenTimeout). Default DefaultOpenTimeout
// (30 s). d must be > 0; math.MaxInt64 means until the process restarts
// (a BreakerOpenError's Until is then the largest time.Time that
// UnixNano can hold, in 2262).
func WithOpenTimeout(d time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.timeout = d
	})
}

// WithMaxOpenTimeout lets the open timeout grow, as Envoy's ejection time:
// a breaker that opens again without having stayed closed for its open
// timeout since it last closed (a failed probe included) stays open for
// the open timeout × its consecutive ejections, up to d (Envoy's
// max_ejection_time); a breaker that closes and stays closed for an open
// timeout starts again from one. Default: the open timeout (no growth).
// d must be > 0; a d below a breaker's open timeout means that open
// timeout; math.MaxInt64 means no limit (the arithmetic saturates).
func WithMaxOpenTimeout(d time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithMaxOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.maxOpen = d
	})
}

// WithBreakerClassifier sets which errors count as failures for the
// breakers whose Settings have no IsSuccessful: a provider that answers
// with a business error is up. Behind a failback invoker, pass the same
// classifier as its WithRetryable (failback.DefaultRetryable by default),
// so that what the breaker counts as "down" is what failback retries.
// Default: DefaultBreakerFailure. A nil failure is a *rebound.ArgumentError.
func WithBreakerClassifier(failure func(error) bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if failure == nil {
			c.bad("WithBreakerClassifier", "failure", "must not be nil: it reports whether an error means the provider failed")
			return
		}
		c.failure = failure
	})
}

// WithBreakerObserver adds o as an observer of the breakers' state
// changes (see BreakerHooks, the typed adapter). Several add up; a nil o
// is ignored. Default: none.
func WithBreakerObserver(o rebound.Observer) BreakerOption {
	if rebound.IsNilObserver(o) {
		return nil
	}
	return breakerOptionFunc(func(c *breakerConfig) { c.obs = append(c.obs, o) })
}

// WithBreakerLogger sets the logger for state changes (Info for open and
// closed, Debug for half-open) and hook panics (Error). Default: none. A
// nil l is ignored. Credentials in targets are scrubbed (logging.Redacted).
func WithBreakerLogger(l *zap.Logger) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if l != nil {
			c.logger = logging.Redacted(l)
		}
	})
}

// WithBreakerMeterProvider records rebound.breaker.targets{state} (the
// directory's breakers per state: closed, half_open, open) and
// rebound.breaker.transitions{state} (state changes, by the state
// entered), both observable: read from atomics when the reader collects,
// so calls record nothing. Close unregisters them. Default (and nil): no
// metrics.
func WithBreakerMeterProvider(mp metric.MeterProvider) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.mp = mp })
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
