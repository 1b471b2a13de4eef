package rebound

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"
)

// An Option configures Retry (and, for WithSeed and WithClock, NewBackOff).
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	notify    []func(Event)
	transient func(error) bool
	limiter   *rate.Limiter
	clock     backoff.Clock
	newTimer  func() backoff.Timer
	seed      uint64
	seeded    bool
}

// EventKind says what happened in a retry loop.
type EventKind int

const (
	// EventRetry: an attempt failed with a transient error and the loop
	// will wait Delay before the next one.
	EventRetry EventKind = iota + 1
	// EventSuccess: an attempt succeeded (Attempt may be 1).
	EventSuccess
	// EventGiveUp: the loop ended with an error (Err is what Retry returns).
	EventGiveUp
)

func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventSuccess:
		return "success"
	case EventGiveUp:
		return "give-up"
	}
	return "unknown"
}

// Event describes one step of a retry loop, for WithNotify hooks.
type Event struct {
	Kind EventKind
	// Attempt is the number of attempts made so far (1 for the first).
	Attempt int
	// Err is the failed attempt's error (EventRetry) or the error Retry
	// returns (EventGiveUp); nil for EventSuccess.
	Err error
	// Delay is the wait before the next attempt, Retry-After included
	// (EventRetry only).
	Delay time.Duration
	// Elapsed is the time since the loop started.
	Elapsed time.Duration
}

// WithNotify adds a hook called synchronously, from the goroutine running
// Retry, on every retry, on success and on give-up. Several hooks are called
// in the order given. A nil fn is ignored.
func WithNotify(fn func(Event)) Option {
	return optionFunc(func(c *config) {
		if fn != nil {
			c.notify = append(c.notify, fn)
		}
	})
}

// WithClassifier sets which errors are transient (worth retrying): Retry
// returns an error for which transient reports false at once, unchanged.
// Without a classifier every error not marked Permanent is retried. Errors
// marked Permanent stop the loop whatever the classifier says.
func WithClassifier(transient func(error) bool) Option {
	return optionFunc(func(c *config) { c.transient = transient })
}

// WithLimiter makes every retry (never the first attempt) wait for a token
// from l, after the backoff delay, so that any number of loops sharing l
// together never exceed its rate. A *rate.Limiter is safe for concurrent use.
// The limiter reads the real clock (not WithClock's). The time spent waiting
// for a token comes on top of the delay an EventRetry reports; if the wait
// would pass ctx's deadline, Retry returns at once (an error wrapping
// context.DeadlineExceeded).
func WithLimiter(l *rate.Limiter) Option {
	return optionFunc(func(c *config) { c.limiter = l })
}

// WithClock sets the clock that Elapsed and MaxElapsed are measured with.
// Default: time.Now (which testing/synctest virtualises). Context deadlines
// are always compared with the real clock (time.Now), as the context
// package does.
func WithClock(clk backoff.Clock) Option {
	return optionFunc(func(c *config) { c.clock = clk })
}

// WithTimer sets a factory for the timer Retry waits on; each Retry call
// makes one timer. Default: a time.Timer. Use it with a fake clock.
func WithTimer(newTimer func() backoff.Timer) Option {
	return optionFunc(func(c *config) { c.newTimer = newTimer })
}

// WithSeed makes the jitter draws deterministic: each BackOff built with the
// same seed produces the same sequence. Default: a random seed per BackOff.
func WithSeed(seed uint64) Option {
	return optionFunc(func(c *config) { c.seed, c.seeded = seed, true })
}
