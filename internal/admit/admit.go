// Package admit holds the engine options that rebound's own layers set and
// users never need: which checks a first attempt passes, what a refusal
// does, a fixed jitter seed, and what a set of options sets. Package rebound sets the functions when it
// is initialised; each returns a rebound.Option.
package admit

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Gate is a set of the admission checks an attempt passes.
type Gate uint8

const (
	// Limiter takes a token of the shared limiter (rebound.WithLimiter).
	Limiter Gate = 1 << iota
	// Budget draws on the RetryBudget: a first attempt deposits, a retry
	// withdraws.
	Budget
	// Throttle asks the AdaptiveThrottle.
	Throttle
	// Breaker asks the Breaker.
	Breaker
)

// Refusal is what a refusal by the budget, the throttle or the breaker
// does to the loop.
type Refusal uint8

const (
	// Stop ends the loop: a *rebound.RetryError whose Reason is the refusal.
	Stop Refusal = iota + 1
	// Defer counts the attempt as failed without sending it and waits the
	// policy's next delay; the loop ends only when its policy runs out.
	Defer
	// Drop drops the work (a stop with no give-up event): for a queue
	// whose callers learn of the drop, not of a give-up.
	Drop
)

// The options, set by package rebound.
var (
	// First sets the gates of a run's first attempt (default Budget,
	// Throttle and Breaker).
	First func(g Gate) any
	// Refuse sets what a refusal by g (Budget, Throttle or Breaker) does
	// (default: the budget stops, the throttle and the breaker defer).
	Refuse func(g Gate, r Refusal) any
	// Seed makes the jitter draws deterministic: the k-th Schedule of a
	// Retrier (k from 0) draws from seed + k*0x9e3779b97f4a7c15.
	Seed func(seed uint64) any
)

// Settings are what a set of rebound options sets, for a layer that
// delivers events and records instruments of its own (failback).
type Settings struct {
	Budget, Throttle bool                 // rebound.WithBudget, WithThrottle given
	Limiter, Breaker bool                 // rebound.WithLimiter, WithBreaker given
	Observers        []any                // rebound.WithObserver's, in order (rebound.Observer)
	MeterProvider    metric.MeterProvider // the last rebound.WithMeterProvider's (nil: none)
	MeterAttrs       []attribute.KeyValue // and its attributes
	Tracer           trace.Tracer         // rebound.WithTracerProvider's (nil: none)
}

// Set by package rebound.
var (
	// Engine returns what opts (a []rebound.Option) set; it does not
	// check them (rebound.NewRetrier does).
	Engine func(opts any) Settings
	// Unobserved drops the observers, meter and tracer of the options
	// before it.
	Unobserved func() any
	// Begin counts a first attempt that a layer makes itself, without a
	// Schedule (failback's Invoke), on r (a *rebound.Retrier): a budget
	// deposit and a throttle request. A rejection by the throttle is a
	// *rebound.RetryError with Reason rebound.ErrThrottled: do not send it.
	Begin func(r any, now time.Time) error
	// Record reports the outcome of an attempt Begin counted to r's throttle.
	Record func(r any, err error, now time.Time)
	// FirstDelay draws a wait before the first attempt of s (a
	// *rebound.Schedule), with the jitter of a first retry; it counts nothing.
	FirstDelay func(s any) time.Duration
	// Lookup asks s (a *rebound.Schedule), at now, for a read beside its
	// run: the gates of a lookup (default: a limiter token), with a token
	// of its own, and no attempt counted. It returns a rebound.Decision's
	// fields: stop (with err), a wait of delay (reason: the throttle's
	// refusal, or nil for a token), or, with neither, the read may start.
	Lookup func(s any, now time.Time) (stop bool, delay time.Duration, reason, err error)
	// Attempts returns the failed attempts of s's run (a
	// *rebound.Schedule), local refusals included: Decision.Attempt of
	// its last answer.
	Attempts func(s any) int
	// Normalized returns the policy a loop runs for p (a rebound.Policy):
	// each zero field its default, each bad field a safe value.
	Normalized func(p any) any
)
