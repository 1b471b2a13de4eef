package failback

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Defaults of New.
const (
	// DefaultRetries is the number of retries after the first attempt.
	DefaultRetries = 3
	// DefaultMaxTasks bounds the tasks queued and running at once.
	DefaultMaxTasks = 100
	// DefaultConcurrency is the number of retry workers.
	DefaultConcurrency = 8
	// DefaultAttemptTimeout bounds each retry attempt.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultInitial and DefaultMax are the Initial and Max of the default
	// policy (full jitter, doubling).
	DefaultInitial = 1 * time.Second
	DefaultMax     = 60 * time.Second
)

// DefaultPolicy returns the policy New uses without WithPolicy: full jitter
// below a ceiling that starts at 1 s, doubles, and is capped at 60 s, so the
// n-th retry (n from 0) waits a uniform draw from
// [rebound.MinDelay, min(60s, 1s*2^n)].
func DefaultPolicy() rebound.Policy {
	return rebound.Policy{Initial: DefaultInitial, Multiplier: 2, Max: DefaultMax}
}

// An Option configures New.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	retries        int
	maxTasks       int
	policy         rebound.Policy
	concurrency    int
	attemptTimeout time.Duration
	retryable      func(error) bool
	logger         *zap.Logger
	lb             cluster.LoadBalance
	hooks          Hooks
	contextValues  bool
	seed           uint64
	seeded         bool
	errs           []error
}

func (c *config) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
}

// WithRetries sets how many times a failed call is retried after its first
// attempt: exactly n retries, n+1 attempts in all (unless the policy's
// MaxAttempts or MaxElapsed stops the task earlier). Default: 3. 0 disables
// retries: Invoke then returns every error of the first attempt unchanged.
// A negative n makes New fail.
func WithRetries(n int) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.bad("WithRetries(%d): the number of retries must be >= 0 (0 disables retries)", n)
			return
		}
		c.retries = n
	})
}

// WithMaxTasks bounds the tasks the invoker holds at once: queued (waiting
// for their due time or for a worker) plus running. A call that fails when
// the limit is reached is not queued: Invoke returns an error wrapping
// ErrQueueFull and Hooks.Dropped reports DropQueueFull. Default: 100. n
// must be at least 1 (to disable retries use WithRetries(0)).
func WithMaxTasks(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.bad("WithMaxTasks(%d): the task limit must be >= 1 (use WithRetries(0) to disable retries)", n)
			return
		}
		c.maxTasks = n
	})
}

// WithPolicy sets the backoff policy. Each task gets its own BackOff from
// p.NewBackOff, created when the call is queued: the first retry waits its
// first delay, and so on. A zero Max means failback's DefaultMax (60 s, or
// Initial if larger) rather than rebound's; other zero fields take
// rebound's defaults. p.MaxAttempts (which counts the first attempt) and
// p.MaxElapsed (counted from the first failure) can end a task before
// WithRetries does. A Retry-After carried by an attempt's error
// (rebound.RetryAfter) lengthens the next wait to at least that delay.
// Default: DefaultPolicy(). An invalid p makes New fail with an error that
// wraps rebound.ErrInvalidPolicy.
func WithPolicy(p rebound.Policy) Option {
	return optionFunc(func(c *config) {
		if err := p.Validate(); err != nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithPolicy: %w", ErrInvalidArgument, err))
			return
		}
		if p.Max == 0 {
			p.Max = max(DefaultMax, p.Initial)
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
			c.bad("WithConcurrency(%d): the number of retry workers must be >= 1", n)
			return
		}
		c.concurrency = n
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
			c.bad("WithAttemptTimeout(%v): the timeout must be >= 0 (0 means none)", d)
			return
		}
		c.attemptTimeout = d
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
		if retryable == nil {
			retryable = DefaultRetryable
		}
		c.retryable = retryable
	})
}

// WithLogger sets the logger. Lines carry component=failback and are
// redacted (logging.Redacted). Queued calls, failed retries and successes
// are logged at Debug, each give-up and each task dropped by Close at Warn
// (method, attempts, target, age, error); calls refused because the queue
// is full are logged like a failing retry loop (logging.Loop): one Warn
// when the queue starts refusing, Debug for each further refusal,
// reminders during long episodes, one Info when a call is queued again.
// Default (and for nil): no logging.
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

// WithHooks sets functions called on the life events of calls and tasks
// (see Hooks). Default: none.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
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
