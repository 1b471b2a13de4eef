package failback

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Defaults of New.
const (
	// DefaultMaxTasks bounds the tasks queued and running at once.
	DefaultMaxTasks = 100
	// DefaultConcurrency is the number of retry workers.
	DefaultConcurrency = 8
	// DefaultAttemptTimeout bounds each retry attempt.
	DefaultAttemptTimeout = 10 * time.Second
)

// DefaultPolicy returns the policy New uses without WithPolicy: at most 4
// attempts (the first one, in Invoke, and 3 retries, as in Dubbo's
// failback), each retry waiting a decorrelated-jitter draw of at least 5 s
// (Dubbo's fixed interval) and at most 60 s, uniform in [5 s, 3 × the
// previous delay]:
//
//	rebound.Policy{Initial: 5 * time.Second, Max: time.Minute, MaxAttempts: 4, Jitter: rebound.DecorrelatedJitter}
//
// So the last retry comes at least 15 s after the first failure (Dubbo's 3
// retries at 5 s), typically about a minute later and at most 2 min: a
// call outlives a provider restart or a short outage, and calls that
// failed together do not retry together. (Until this release it was full
// jitter below 1 s doubling, whose 4 attempts all fell within 7 s of the
// failure: in the storm simulator every call of a 10 s outage gave up.)
//
// A Policy given to WithPolicy means what it means in package rebound: its
// zero fields take rebound's defaults (Initial 1 s, Max 30 s, full jitter;
// MaxAttempts 0 is unlimited), not these.
func DefaultPolicy() rebound.Policy {
	return rebound.Policy{Initial: 5 * time.Second, Max: time.Minute, MaxAttempts: 4, Jitter: rebound.DecorrelatedJitter}
}

// An Option configures New. A nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	maxTasks       int
	policy         rebound.Policy
	concurrency    int
	perTarget      int // 0: half the workers
	attemptTimeout time.Duration
	ttl            time.Duration
	retryable      func(error) bool
	logger         *zap.Logger
	lb             cluster.LoadBalance
	observers      []rebound.Observer
	contextValues  bool
	budget         *rebound.RetryBudget
	throttle       *rebound.AdaptiveThrottle
	seed           uint64
	seeded         bool
	durable        storeConfig          // WithStore, WithCodec (store.go)
	meterProvider  metric.MeterProvider // WithMeterProvider (metrics.go)
	tracer         trace.Tracer         // WithTracerProvider (trace.go)
	errs           []error
}

func (c *config) bad(fn, arg, reason string, err error) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "failback." + fn, Arg: arg, Reason: reason, Err: err})
}

// WithMaxTasks bounds the tasks the invoker holds at once: queued (waiting
// for their due time or for a worker) plus running. A call that fails when
// the limit is reached is not queued: Invoke returns an error wrapping
// ErrQueueFull and Hooks.Dropped reports DropQueueFull. Default: 100. n
// must be at least 1 (to disable retries use a Policy with MaxAttempts 1).
func WithMaxTasks(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithMaxTasks", "n", "must be >= 1 (to disable retries use a Policy with MaxAttempts 1)", nil)
			return
		}
		c.maxTasks = n
	})
}

// WithPolicy sets the backoff policy, the one knob for how long and how
// often a call is retried. Each task gets its own BackOff from the policy,
// created when the call is queued: the first retry waits its first delay,
// and so on. p means what it means in package rebound (zero fields take
// rebound's defaults: Max 30 s, MaxAttempts and MaxElapsed unlimited):
//
//   - MaxAttempts counts every attempt, the first one (made in Invoke)
//     included: 1 disables retries (Invoke then returns every error of the
//     first attempt unchanged), 4 means 3 retries, 0 retries until success,
//     MaxElapsed, the call's TTL or Close;
//   - MaxElapsed bounds the start of every retry, counted from the first
//     failure; the time a due task waits for a free worker counts too;
//   - a Retry-After carried by an attempt's error (rebound.RetryAfter)
//     lengthens the next wait to at least that delay, capped at
//     Policy.MaxRetryAfter (default 5 min, or Max if larger), so that
//     "Retry-After: 4294967295" cannot pin a task slot for ever.
//
// Delays are decided by rebound's step function (rebound.Schedule, one
// per task, from a rebound.Retrier compiled by New), not by failback.
//
// Default: DefaultPolicy() (3 retries). An invalid p makes New fail with a
// *rebound.ArgumentError wrapping rebound.ErrInvalidPolicy.
func WithPolicy(p rebound.Policy) Option {
	return optionFunc(func(c *config) {
		if err := p.Validate(); err != nil {
			c.bad("WithPolicy", "p", "must be a valid rebound.Policy", err)
			return
		}
		c.policy = p
	})
}

// WithConcurrency sets the number of retry workers: at most n retry
// attempts run at once, whatever the number of queued tasks. Due tasks wait
// for a free worker in due-time order. Default: 8. n must be at least 1.
func WithConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithConcurrency", "n", "must be >= 1", nil)
			return
		}
		c.concurrency = n
	})
}

// WithTargetConcurrency bounds the retry attempts that run at once against
// one target (the Target of the invoker the load balance selected), so
// that one dead or slow provider cannot occupy every worker: a retry whose
// selection lands on a target at its bound goes to another provider while
// one is left (the load balance is asked again, with the busy targets
// excluded); otherwise it waits, without counting an attempt, until an
// attempt on that target ends. Default: half the workers (at least 1), so
// with the default 8 workers one provider gets at most 4 at a time. n must
// be at least 1; n >= the number of workers means no bound.
func WithTargetConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithTargetConcurrency", "n", "must be >= 1", nil)
			return
		}
		c.perTarget = n
	})
}

// WithAttemptTimeout bounds each retry attempt: its context expires after
// d. Such an expiry (context.DeadlineExceeded from the attempt's own
// deadline) is retryable under the default classifier. The first attempt,
// made in Invoke with the caller's context, is not bounded by d. Default:
// 10 s. 0 means no timeout (the invoker must then bound its calls); a
// negative d makes New fail.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.bad("WithAttemptTimeout", "d", "must be >= 0 (0 means no timeout)", nil)
			return
		}
		c.attemptTimeout = d
	})
}

// WithTTL sets the time-to-live of every queued call, counted from the
// failure of its first attempt: a call whose next attempt would start
// after its TTL is dropped with DropExpired instead of retried (a
// notification an hour late is often worse than none). WithCallTTL sets
// it per call. Default: 0, no TTL (the Policy alone bounds retries). A
// negative d makes New fail.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.bad("WithTTL", "d", "must be >= 0 (0 means no time-to-live)", nil)
			return
		}
		c.ttl = d
	})
}

// WithBudget makes retries draw from b, a rebound.RetryBudget that any
// number of invokers and loops may share (one per downstream service):
// each first attempt made by Invoke is a deposit, each retry a withdrawal
// when it is due (the engine's rebound.RefuseDrop rule), and a call whose
// retry the budget refuses then is dropped with DropBudget
// (Hooks.Dropped, by the retry worker; Invoke has queued the call and
// returned nil). So during a
// full outage the retries sent stay at the budget's ratio of the calls
// plus its floor (20% plus 10/s by default) instead of multiplying the
// load. With a budget, Invoke reads the clock once per call. Default:
// none. A nil b makes New fail.
func WithBudget(b *rebound.RetryBudget) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			c.bad("WithBudget", "b", "must not be nil (omit the option for no budget)", nil)
			return
		}
		c.budget = b
	})
}

// WithThrottle makes retries ask t, a rebound.AdaptiveThrottle any number
// of invokers and loops may share (one per backend), when they are due (a
// worker took them): a retry t rejects locally is not sent; it counts as a
// failed attempt of the call (toward MaxAttempts and MaxElapsed, error
// rebound.ErrThrottled), the call is rescheduled after the policy's next
// delay and reported to Hooks.Retried with that error and delay, and
// Stats.Throttled counts it. A throttled call is never dropped for it: it
// ends only when its policy runs out, in GaveUp (Reason
// rebound.ErrExhausted, Last rebound.ErrThrottled), or for its TTL or
// Close like any call. Every attempt counts as a request and its outcome is
// recorded (a success, or an error the classifier does not retry, is an
// accept), first attempts included, but first attempts are never rejected:
// Invoke always makes them. With a throttle, Invoke reads the clock once
// per call. Default: none. A nil t makes New fail.
func WithThrottle(t *rebound.AdaptiveThrottle) Option {
	return optionFunc(func(c *config) {
		if t == nil {
			c.bad("WithThrottle", "t", "must not be nil (omit the option for no throttle)", nil)
			return
		}
		c.throttle = t
	})
}

// WithRetryable sets the classifier that decides which errors are worth a
// retry: on the first attempt (retryable: queue the call; otherwise return
// the error at once) and on every retry (retryable: schedule another one;
// otherwise give up). Errors marked rebound.Permanent are never retried,
// whatever retryable says; a first attempt that fails after the caller's
// context is done is never queued. retryable is called with no lock held,
// from the goroutine running the attempt, and must be safe for concurrent
// use. Default (and for a nil retryable): DefaultRetryable.
func WithRetryable(retryable func(error) bool) Option {
	return optionFunc(func(c *config) {
		if retryable != nil {
			c.retryable = retryable
		}
	})
}

// WithLogger sets the logger. Lines carry component=failback and are
// redacted (logging.Redacted). Queued calls, failed retries and successes
// are logged at Debug, each give-up and each task dropped by Close at Warn
// (method, attempts, target, age, error), each recovered panic at Error;
// calls refused because the queue is full are logged like a failing retry
// loop (logging.Loop): one Warn when the queue starts refusing, Debug for
// each further refusal, reminders during long episodes, one Info when a
// call is queued again. Default (and for nil): no logging.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithLoadBalance sets how an attempt picks its invoker. Retries pass the
// invokers that already failed for the task as exclude. Default (and for
// nil): a *cluster.Random.
func WithLoadBalance(lb cluster.LoadBalance) Option {
	return optionFunc(func(c *config) {
		if lb != nil {
			c.lb = lb
		}
	})
}

// WithObserver adds o as an observer of the invoker's events (see Hooks
// for the kinds, the goroutines and the guarantees): a Hooks value, a
// rebound.ObserverFunc, a rebound.Queue. Several add up, called in the
// order given. A nil o is ignored. Default: none.
func WithObserver(o rebound.Observer) Option {
	if rebound.IsNilObserver(o) {
		return nil
	}
	if h, ok := o.(Hooks); ok && h.Queued == nil && h.Retried == nil && h.Succeeded == nil && h.GaveUp == nil && h.Dropped == nil {
		return nil
	}
	return optionFunc(func(c *config) { c.observers = append(c.observers, o) })
}

// WithContextValues makes retries see the values of the caller's context
// (trace IDs, auth): the task keeps context.WithoutCancel(ctx) of the
// Invoke call, and each retry attempt's context is derived from it. The
// caller's cancellation and deadline are never inherited. Default: off;
// retries run under a fresh context with no values, so that a task holds
// no reference to the caller's context.
func WithContextValues() Option {
	return optionFunc(func(c *config) { c.contextValues = true })
}

// WithSeed makes the jitter draws reproducible: the n-th task queued by the
// invoker (n from 0) gets a BackOff built with rebound.WithSeed derived from
// seed and n. Default: a random seed per task.
func WithSeed(seed uint64) Option {
	return optionFunc(func(c *config) { c.seed, c.seeded = seed, true })
}
