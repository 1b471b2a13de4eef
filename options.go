package rebound

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound/internal/nilness"
	"github.com/rebound-go/rebound/internal/telemetry"
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

// WithBreaker makes every attempt of the loop ask b first.
// A refused attempt is handled like one the throttle rejects (see WithThrottle).
// b must be safe for concurrent use and not nil (docs/policy.md).
func WithBreaker(b Breaker) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			c.bad("WithBreaker", "b", "must not be nil (omit the option for no breaker)")
			return
		}
		if nilness.Is(b) {
			c.bad("WithBreaker", "b", "is a nil pointer: pass a breaker, for example gobreaker.NewTwoStepCircuitBreaker")
			return
		}
		c.breaker = b
	})
}

// WithObserver adds o as an observer of the loop's events.
// Several add up, called in order after the meter; a nil o is ignored.
// Observe runs on the loop's goroutine, and its panics are not recovered.
func WithObserver(o Observer) Option {
	if nilness.Is(o) {
		return nil
	}
	return &observerOption{l: *listenersOf(o), o: o} // made once: Retry and NewRetrier use it as it is
}

func (v *observerOption) apply(c *config) { c.observers = append(c.observers, &v.l) }

// WithMeterProvider records the loop's OpenTelemetry metrics with mp, each with attrs.
// A nil mp records nothing; if several are given, the last applies.
// It creates the instruments when called: build the option once.
func WithMeterProvider(mp metric.MeterProvider, attrs ...attribute.KeyValue) Option {
	if mp == nil {
		return nil
	}
	t, err := telemetry.NewRetry(mp, attrs...)
	if err != nil {
		return optionFunc(func(c *config) {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.WithMeterProvider", Arg: "mp",
				Reason: "could not create the instruments", Err: err})
		})
	}
	m := newRetryMeter(t)
	m.mp, m.attrs = mp, attrs
	return m // made once: Retry and NewRetrier use it as it is
}

// apply makes m the loop's meter; if several are given, the last applies.
func (m *retryMeter) apply(c *config) { c.meter = m }

// WithTracerProvider makes every attempt of Retry and Retrier.Do a span of tp,
// named by the tracer "github.com/rebound-go/rebound".
// A nil tp, the default, traces nothing and costs nothing (docs/tracing.md).
func WithTracerProvider(tp trace.TracerProvider) Option {
	if tp == nil {
		return nil
	}
	t := &tracer{tp.Tracer(telemetry.ScopeName)}
	return optionFunc(func(c *config) { c.tracer = t })
}

func (n maxAttempts) apply(c *config) {
	if n < 0 {
		c.bad("WithMaxAttempts", "n", "must not be negative (0 means unlimited)")
		return
	}
	c.maxAttempts = int(n)
}

func (d maxElapsed) apply(c *config) {
	if d < 0 {
		c.bad("WithMaxElapsed", "d", "must not be negative (0 means unlimited)")
		return
	}
	c.maxElapsed = time.Duration(d)
}

// WithMaxAttempts stops a loop after n attempts, the first included.
// 1 means no retry; 0, the default, means unlimited.
// A negative n is an *ArgumentError.
func WithMaxAttempts(n int) Option { return maxAttempts(n) }

// WithMaxElapsed bounds the time from a loop's start to any attempt's start.
// A loop stops rather than wait past it; 0, the default, means unlimited.
// A negative d is an *ArgumentError.
func WithMaxElapsed(d time.Duration) Option { return maxElapsed(d) }

// withAdmission sets the gates an attempt of kind k passes before it is
// made (defaults: defaultGates). A gate whose part is not configured (no
// WithLimiter, no WithBudget...) admits every attempt. An unknown kind or
// gate is an *ArgumentError.
func withAdmission(k attemptKind, g gate) Option {
	return optionFunc(func(c *config) {
		switch {
		case k >= numKinds:
			c.bad("WithAdmission", "k", fmt.Sprintf("is %d: must be a first, retry or lookup attempt", k))
		case k == kindLookup && g&(gateBudget|gateBreaker) != 0:
			c.bad("WithAdmission", "g", "may hold only admit.Limiter and admit.Throttle for kindLookup: a lookup is not an attempt of the run, so it neither draws on the budget nor holds a breaker admission")
		case g&^allGates != 0:
			c.bad("WithAdmission", "g", fmt.Sprintf("has unknown bits %#x: must be a set of admit.Limiter, admit.Budget, admit.Throttle, admit.Breaker", uint8(g&^allGates)))
		default:
			c.gates[k] = g
			c.gatesSet[k] = true
		}
	})
}

// withRefusal sets what a refusal by gate g (the budget, the throttle or
// the breaker; the limiter never refuses, it makes the attempt wait) does.
// Defaults: defaultRefusal. Anything else is an *ArgumentError.
func withRefusal(g gate, r refusalRule) Option {
	return optionFunc(func(c *config) {
		i := refusalGate(g)
		switch {
		case i < 0:
			c.bad("WithRefusal", "g", fmt.Sprintf("is %#x: must be one of admit.Budget, admit.Throttle, admit.Breaker", uint8(g)))
		case r < refuseStop || r > refuseDrop:
			c.bad("WithRefusal", "r", fmt.Sprintf("is %d: must be admit.Stop, admit.Defer or admit.Drop", r))
		default:
			c.refusal[i] = r
		}
	})
}

// gatesOf returns the admission of kind k.
func (c *config) gatesOf(k attemptKind) gate {
	if c.gatesSet[k] {
		return c.gates[k]
	}
	return defaultGates[k]
}

// refusalOf returns the rule of the refusing gate g.
func (c *config) refusalOf(g gate) refusalRule {
	i := refusalGate(g)
	if r := c.refusal[i]; r != refuseDefault {
		return r
	}
	return defaultRefusal[i]
}

// budgetAtFailure reports whether a retry's withdrawal from the budget is
// made when the failure is reported (Next): a refusal that stops the loop
// is known then, so the loop does not wait a delay to learn it. Under the
// other rules the withdrawal is made when the retry is due.
func (c *config) budgetAtFailure() bool {
	return c.budget != nil && c.gatesOf(kindRetry)&gateBudget != 0 && c.refusalOf(gateBudget) == refuseStop
}

// begin accounts for a run's first attempt at now: a deposit in the
// budget, a request for the throttle. It reports whether the throttle lets
// the attempt through (false: rejected locally, do not send it).
func (c *config) begin(now time.Time) bool {
	g := c.gatesOf(kindFirst)
	if c.budget != nil && g&gateBudget != 0 {
		c.budget.deposit(now) // the work arrived (see ready)
	}
	return c.throttle == nil || g&gateThrottle == 0 || c.throttle.allow(now)
}

// record gives the throttle an attempt's outcome.
func (c *config) record(err error, now time.Time) {
	if c.throttle != nil && (err == nil || !c.isTransient(err)) {
		c.throttle.accepted(now)
	}
}
