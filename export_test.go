package rebound

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// The time seams, exported to the package's external tests only.
var WithClock = withClock

func WithTimer(newTimer func() backoff.Timer) Option {
	return withTimer(func() timer { return newTimer() })
}

// Validate is NewRetrier's check of p (tests only).
func (p Policy) Validate() error { return p.validate() }

// MinDelay is the floor of every delay (tests only).
const MinDelay = minDelay

// Ceiling returns the n-th delay's upper bound, n from 0 (tests only).
// It never overflows; a negative n counts as 0.
func (p Policy) Ceiling(n int) time.Duration { return p.normalized().ceiling(n) }

// Normalized returns the policy a loop runs (tests only; layers reach it
// through internal/admit).
func (p Policy) Normalized() Policy { return p.normalized() }

// Attempts returns the failed attempts of the run, local refusals
// included (tests only; a loop reads Decision.Attempt).
func (s *Schedule) Attempts() int { return s.attempts }

// Deposit, TryWithdraw, Allow and Accepted are the budget's and the
// throttle's counts, which the engine makes (tests only).
func (b *RetryBudget) Deposit(now time.Time)          { b.deposit(now) }
func (b *RetryBudget) TryWithdraw(now time.Time) bool { return b.tryWithdraw(now) }
func (t *AdaptiveThrottle) Allow(now time.Time) bool  { return t.allow(now) }
func (t *AdaptiveThrottle) Accepted(now time.Time)    { t.accepted(now) }

// Start returns the start of the run; MaxElapsed counts from it (tests only).
func (s *Schedule) Start() time.Time { return s.start }

// Balance returns how many retries b would allow at now (tests only).
func (b *RetryBudget) Balance(now time.Time) int { return b.balance(now) }

// Probability returns t's rejection probability at now (tests only).
func (t *AdaptiveThrottle) Probability(now time.Time) float64 { return t.probability(now) }

// Len returns the number of events waiting (tests only).
func (q *Queue) Len() int { return q.len() }

// Outstanding returns s's outstanding attempt of the run, as if admitted
// last: a test reports failures in a row without asking the gates.
func Outstanding(s *Schedule) Attempt { return Attempt{s: s, kind: kindRetry, gen: s.gen} }

// Hooks observes a retry loop's events with one optional function per
// kind (tests only; a user switches on Event.Kind in an ObserverFunc).
type Hooks struct {
	Attempted, Retried, Recovered, GaveUp, Throttled func(Event)
}

// Observe calls the field for e.Kind, if set.
func (h Hooks) Observe(e Event) {
	var f func(Event)
	switch e.Kind {
	case EventAttempt:
		f = h.Attempted
	case EventRetry:
		f = h.Retried
	case EventRecovered:
		f = h.Recovered
	case EventGiveUp:
		f = h.GaveUp
	case EventThrottled:
		f = h.Throttled
	}
	if f != nil {
		f(e)
	}
}

// The options of internal/admit, under their former names (tests only).
var (
	WithAdmission = withAdmission
	WithRefusal   = withRefusal
	WithSeed      = withSeed
)

type (
	Gate    = gate
	Refusal = refusalRule
)

const (
	GateLimiter  = gateLimiter
	GateBudget   = gateBudget
	GateThrottle = gateThrottle
	GateBreaker  = gateBreaker
	RefuseStop   = refuseStop
	RefuseDefer  = refuseDefer
	RefuseDrop   = refuseDrop
)

// Begin, Record and FirstDelay are reached by rebound's layers through
// internal/admit; the tests call them as methods.
func (r *Retrier) Begin(now time.Time) error       { return r.beginFirst(now) }
func (r *Retrier) Record(err error, now time.Time) { r.recordFirst(err, now) }
func (s *Schedule) FirstDelay() time.Duration      { return s.firstDelay() }

// AttemptKind names the kind Admit infers (tests only): a test states the
// kind it expects of each admission.
type AttemptKind = attemptKind

const (
	FirstAttempt  = kindFirst
	RetryAttempt  = kindRetry
	LookupAttempt = kindLookup
)

// AdmitKind is Admit for an attempt of kind k, whatever the run's state
// (tests only): a test reaches each kind's gates directly. Admit infers
// the kind (TestAdmitInfersTheKind). A LookupAttempt is the lookup that
// subscriptions reach through internal/admit.
func (s *Schedule) AdmitKind(now time.Time, k AttemptKind) (Attempt, Decision) {
	return s.admit(now, k)
}

// Kind returns the kind of the attempt Admit asks for next (tests only).
func (s *Schedule) Kind() AttemptKind { return s.kind() }

// Verdict is a Decision read as one of three answers (tests only).
type Verdict uint8

const (
	AttemptNow Verdict = iota // not Stop, Delay 0: admitted
	WaitFor                   // not Stop, Delay > 0
	Stop                      // Stop
)

// Verdict returns d's answer.
func (d Decision) Verdict() Verdict {
	switch {
	case d.Stop:
		return Stop
	case d.Delay > 0:
		return WaitFor
	}
	return AttemptNow
}

func (v Verdict) String() string { return [...]string{"attempt now", "wait", "stop"}[v] }
