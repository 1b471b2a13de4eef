package rebound

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// An Option configures Retry and NewRetrier. A nil Option is ignored.
// A bad value is an *ArgumentError from Retry or NewRetrier.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is the compiled form of a set of options (a Retrier holds one).
type config struct {
	observers []*listeners                // WithObserver, in order; compiled into fan
	meter     *retryMeter                 // WithMeterProvider (metrics.go), the first observer
	fan       [numLoopKinds][]func(Event) // per kind: the meter's, then the observers' (hooks.go)
	listening bool                        // fan is not empty
	limiter   *rate.Limiter
	budget    *RetryBudget
	throttle  *AdaptiveThrottle
	breaker   Breaker        // WithBreaker (breaker.go)
	tracer    *tracer        // WithTracerProvider (trace.go)
	gates     [numKinds]gate // withAdmission (decide.go)
	gatesSet  [numKinds]bool
	refusal   [3]refusalRule // withRefusal: budget, throttle, breaker
	clock     clock
	newTimer  func() timer
	seed      uint64
	seeded    bool
	limits    // WithMaxAttempts, WithMaxElapsed (limits.go)
	errs      []error
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

func (c *config) bad(option, arg, reason string) {
	c.errs = append(c.errs, &ArgumentError{Func: "rebound." + option, Arg: arg, Reason: reason})
}

// now reads the configured clock; it works on a nil *config.
func (c *config) now() time.Time {
	if c != nil && c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

// WithLimiter makes every retry take a token from l once its delay is over.
// Loops sharing l never start retries faster than its rate.
// l must not be nil and must be able to grant a token (docs/policy.md).
func WithLimiter(l *rate.Limiter) Option {
	return optionFunc(func(c *config) {
		switch {
		case l == nil:
			c.bad("WithLimiter", "l", "must not be nil (omit the option for no limiter)")
		case l.Burst() < 1 && l.Limit() != rate.Inf:
			c.bad("WithLimiter", "l", fmt.Sprintf(
				"has burst %d at limit %v: it can never grant a token; the burst must be >= 1", l.Burst(), l.Limit()))
		default:
			c.limiter = l
		}
	})
}

// WithBudget makes the loop's retries draw from b, which loops may share.
// A refused retry ends the loop with Reason ErrBudgetExhausted.
// b must come from NewRetryBudget.
func WithBudget(b *RetryBudget) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			c.bad("WithBudget", "b", "must not be nil (omit the option for no budget)")
			return
		}
		if b.window <= 0 { // set once by NewRetryBudget, never changed
			c.bad("WithBudget", "b", "is a zero RetryBudget, which is not usable: make it with NewRetryBudget")
			return
		}
		c.budget = b
	})
}

// WithThrottle makes every attempt of the loop ask t first; loops may share t.
// A rejected attempt is not sent; it counts as failed, and the loop backs off.
// t must come from NewAdaptiveThrottle (docs/policy.md).
func WithThrottle(t *AdaptiveThrottle) Option {
	return optionFunc(func(c *config) {
		if t == nil {
			c.bad("WithThrottle", "t", "must not be nil (omit the option for no throttle)")
			return
		}
		if t.window <= 0 { // set once by NewAdaptiveThrottle, never changed
			c.bad("WithThrottle", "t", "is a zero AdaptiveThrottle, which is not usable: make it with NewAdaptiveThrottle")
			return
		}
		c.throttle = t
	})
}

// withClock sets the clock that Elapsed, MaxElapsed, the limiter, the
// budget and the throttle are read with (tests). Default (and for a nil
// clk): time.Now, which testing/synctest virtualises. Context deadlines
// are always compared with the real clock.
func withClock(clk clock) Option {
	return optionFunc(func(c *config) { c.clock = clk })
}

// withTimer sets a factory for the timer a loop waits on (tests, with a
// fake clock). Each Retry call (or Retrier.Do that retries) makes one,
// and one more for a first attempt that waits for its token. Default
// (and for nil): a time.Timer.
func withTimer(newTimer func() timer) Option {
	return optionFunc(func(c *config) { c.newTimer = newTimer })
}

// withSeed makes the jitter draws deterministic (tests, simulations). A
// BackOff built with seed s, and the first Schedule of a Retrier (so every
// Retry call) built with it, draw the same sequence; the k-th Schedule of a
// Retrier (k from 0) draws from seed s + k*0x9e3779b97f4a7c15, so that
// loops of one Retrier never retry in lockstep. Default: a random seed per
// BackOff or Schedule.
func withSeed(seed uint64) Option {
	return optionFunc(func(c *config) { c.seed, c.seeded = seed, true })
}

// clock is what a loop reads the time from (withClock).
type clock interface{ Now() time.Time }

// timer is what a loop waits on (withTimer); a fake one runs in fake time.
type timer interface {
	Start(d time.Duration)
	Stop()
	C() <-chan time.Time
}

// isTransient reports whether the loop would retry err.
func (c *config) isTransient(err error) bool {
	return asPermanent(err) == nil
}
