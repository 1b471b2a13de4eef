package failback

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/nilness"
)

// Defaults of New.
const (
	defaultMaxTasks       = 100
	defaultConcurrency    = 8
	defaultAttemptTimeout = 10 * time.Second
)

// DefaultPolicy returns the pacing New uses without WithPolicy:
// decorrelated jitter between 5 s and 60 s. New then stops a call after 4
// attempts (3 retries, as in Dubbo's failback; see docs/failback.md).
func DefaultPolicy() rebound.Policy {
	return rebound.Policy{Initial: 5 * time.Second, Max: time.Minute, Jitter: rebound.DecorrelatedJitter}
}

// defaultMaxAttempts is the limit New uses without WithPolicy.
const defaultMaxAttempts = 4

// An Option configures New. A nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	maxTasks       int
	policy         rebound.Policy
	limits         []rebound.Option // WithPolicy's: when a call stops, admission, observation
	testOpts       []rebound.Option // tests: engine options beside WithPolicy's
	concurrency    int
	perTarget      int // 0: half the workers (tests set it)
	attemptTimeout time.Duration
	ttl            time.Duration
	retryable      func(error) bool
	logger         *zap.Logger
	lb             cluster.LoadBalance
	observers      []rebound.Observer
	contextValues  bool
	budget         bool   // WithPolicy's options hold rebound.WithBudget
	throttle       bool   // and rebound.WithThrottle
	seed           uint64 // tests: reproducible jitter
	seeded         bool
	durable        storeConfig          // WithStore (store.go)
	meterProvider  metric.MeterProvider // WithPolicy's rebound.WithMeterProvider (metrics.go)
	meterAttrs     []attribute.KeyValue
	tracer         trace.Tracer // WithPolicy's rebound.WithTracerProvider (trace.go)
	errs           []error
}

// newConfig applies opts over the defaults and checks the result.
func newConfig(dir cluster.Directory, opts []Option) (config, error) {
	cfg := config{
		maxTasks:       defaultMaxTasks,
		policy:         DefaultPolicy(),
		limits:         []rebound.Option{rebound.WithMaxAttempts(defaultMaxAttempts)},
		concurrency:    defaultConcurrency,
		attemptTimeout: defaultAttemptTimeout,
		retryable:      DefaultRetryable,
		logger:         zap.NewNop(),
		lb:             cluster.Random(),
	}
	if dir == nil {
		cfg.bad("New", "dir", "must not be nil: a cluster.Directory is required", nil)
	} else if nilness.Is(dir) {
		cfg.bad("New", "dir", "is a nil pointer: a cluster.Directory is required", nil)
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	cfg.engine()
	if cfg.perTarget == 0 {
		cfg.perTarget = max(1, cfg.concurrency/2)
	}
	if len(cfg.errs) > 0 {
		return cfg, errors.Join(cfg.errs...)
	}
	return cfg, nil
}

func (c *config) bad(fn, arg, reason string, err error) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "failback." + fn, Arg: arg, Reason: reason, Err: err})
}

// WithMaxTasks bounds the tasks held at once, queued plus running. A call
// that fails beyond it is not queued: Invoke returns ErrQueueFull. Default:
// 100; n must be at least 1.
func WithMaxTasks(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithMaxTasks", "n", "must be >= 1 (to disable retries use WithPolicy with rebound.WithMaxAttempts(1))", nil)
			return
		}
		c.maxTasks = n
	})
}

// WithPolicy sets how long a call waits between attempts (p) and the
// engine's options: limits, rebound.WithBudget, WithThrottle,
// WithObserver, WithMeterProvider, WithTracerProvider. Default:
// DefaultPolicy() and at most 4 attempts. WithPolicy replaces both: with
// no limit in opts a call retries until its TTL (WithTTL) or Close, and the zero Policy
// paces as rebound.Policy's own defaults. To only observe, keep them:
// WithPolicy(DefaultPolicy(), rebound.WithMaxAttempts(4), obs). A bad p or option,
// or rebound.WithLimiter or WithBreaker, makes New fail; see
// docs/failback.md for what each option does here.
func WithPolicy(p rebound.Policy, opts ...rebound.Option) Option {
	return optionFunc(func(c *config) {
		if _, err := rebound.NewRetrier(p, opts...); err != nil {
			c.bad("WithPolicy", "p", "must be a valid rebound.Policy with valid options", err)
			return
		}
		c.policy, c.limits = p, opts
	})
}

// engine reads what the engine's options set (WithPolicy's, then the
// tests'): failback applies the observers, meter and tracer itself.
func (c *config) engine() {
	c.limits = append(c.limits[:len(c.limits):len(c.limits)], c.testOpts...)
	e := admit.Engine(c.limits)
	if e.Limiter || e.Breaker {
		// A retry's admission knows a budget's and a throttle's refusals
		// only: a token wait or a breaker's refusal would be counted as a
		// throttle rejection, and a breaker's admission left unreported.
		c.bad("WithPolicy", "opts", "holds rebound.WithLimiter or rebound.WithBreaker, which failback does not apply: "+
			"its concurrency bounds the retries, and cluster.NewBreakerDirectory gives each target a breaker", nil)
	}
	c.budget, c.throttle = e.Budget, e.Throttle
	for _, o := range e.Observers {
		c.observers = append(c.observers, o.(rebound.Observer))
	}
	c.meterProvider, c.meterAttrs, c.tracer = e.MeterProvider, e.MeterAttrs, e.Tracer
}

// WithConcurrency sets the number of retry workers, so at most n retries
// run at once. One target gets at most half of them (at least 1). Default:
// 8; n must be at least 1.
func WithConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithConcurrency", "n", "must be >= 1", nil)
			return
		}
		c.concurrency = n
	})
}

// WithAttemptTimeout bounds each retry attempt; the first one, made with
// the caller's context, is not bounded. Default: 10 s; 0 means no timeout.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.bad("WithAttemptTimeout", "d", "must be >= 0 (0 means no timeout)", nil)
			return
		}
		c.attemptTimeout = d
	})
}

// WithTTL sets the time-to-live of every queued call, from its first
// failure. A call whose next attempt would start later is dropped with
// ErrExpired. Default: 0, no TTL.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.bad("WithTTL", "d", "must be >= 0 (0 means no time-to-live)", nil)
			return
		}
		c.ttl = d
	})
}

// WithRetryable sets the classifier of errors worth a retry, on the first
// attempt and on every retry. rebound.Permanent always wins. Default (and
// for nil): DefaultRetryable.
func WithRetryable(retryable func(error) bool) Option {
	return optionFunc(func(c *config) {
		if retryable != nil {
			c.retryable = retryable
		}
	})
}

// WithLogger sets the logger: give-ups and drops at Warn, the rest at
// Debug, a full queue once per episode (logging.Loop). Lines are redacted.
// Default (and for nil): no logging.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithLoadBalance sets how an attempt picks its invoker; retries exclude
// the invokers that failed for the call. Default (and for nil):
// cluster.Random().
func WithLoadBalance(lb cluster.LoadBalance) Option {
	return optionFunc(func(c *config) {
		if lb != nil {
			c.lb = lb
		}
	})
}

// WithContextValues makes retries see the values of the caller's context
// (trace IDs, auth), never its cancellation. Default: off, so a task keeps
// no reference to the caller's context.
func WithContextValues() Option {
	return optionFunc(func(c *config) { c.contextValues = true })
}
