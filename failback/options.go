package failback

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
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
	limits         []rebound.Option // WithPolicy's: when a call stops
	concurrency    int
	perTarget      int // 0: half the workers (tests set it)
	attemptTimeout time.Duration
	ttl            time.Duration
	retryable      func(error) bool
	logger         *zap.Logger
	lb             cluster.LoadBalance
	observers      []rebound.Observer
	contextValues  bool
	budget         *rebound.RetryBudget
	throttle       *rebound.AdaptiveThrottle
	seed           uint64 // tests: reproducible jitter
	seeded         bool
	durable        storeConfig          // WithStore, WithCodec (store.go)
	meterProvider  metric.MeterProvider // WithMeterProvider (metrics.go)
	tracer         trace.Tracer         // WithTracerProvider (trace.go)
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

// WithPolicy sets how long a call waits between attempts (p) and when it
// stops (limits: rebound.WithMaxAttempts, rebound.WithMaxElapsed; none
// means never). Default: DefaultPolicy() and at most 4 attempts. A bad p
// or limit makes New fail.
func WithPolicy(p rebound.Policy, limits ...rebound.Option) Option {
	return optionFunc(func(c *config) {
		if _, err := rebound.NewRetrier(p, limits...); err != nil {
			c.bad("WithPolicy", "p", "must be a valid rebound.Policy with valid limits", err)
			return
		}
		c.policy, c.limits = p, limits
	})
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

// WithBudget makes retries draw from b, a budget several invokers may share.
// A retry b refuses when it is due is dropped (Reason
// rebound.ErrBudgetExhausted). A nil b makes New fail.
func WithBudget(b *rebound.RetryBudget) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			c.bad("WithBudget", "b", "must not be nil (omit the option for no budget)", nil)
			return
		}
		c.budget = b
	})
}

// WithThrottle makes due retries ask t, a throttle several invokers may
// share. A rejected retry is not sent: it counts as a failed attempt with
// error rebound.ErrThrottled. A nil t makes New fail.
func WithThrottle(t *rebound.AdaptiveThrottle) Option {
	return optionFunc(func(c *config) {
		if t == nil {
			c.bad("WithThrottle", "t", "must not be nil (omit the option for no throttle)", nil)
			return
		}
		c.throttle = t
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

// WithObserver adds o as an observer of the invoker's events (see Task).
// Several are called in the order given; a nil o is ignored.
func WithObserver(o rebound.Observer) Option {
	if nilness.Is(o) {
		return nil
	}
	return optionFunc(func(c *config) { c.observers = append(c.observers, o) })
}

// WithContextValues makes retries see the values of the caller's context
// (trace IDs, auth), never its cancellation. Default: off, so a task keeps
// no reference to the caller's context.
func WithContextValues() Option {
	return optionFunc(func(c *config) { c.contextValues = true })
}
