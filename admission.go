package rebound

import (
	"fmt"
	"time"
)

// AttemptKind is what an attempt is, for admission (WithAdmission).
type AttemptKind uint8

const (
	// FirstAttempt is the first attempt of a run: after NewSchedule, Reset
	// or a success.
	FirstAttempt AttemptKind = iota
	// RetryAttempt is an attempt after a failure of the run.
	RetryAttempt
	// LookupAttempt is a read beside the run (a subscription's
	// confirmation lookup): it takes its admission but is not an attempt
	// of the run (no attempt counted, no MaxElapsed). It holds its own
	// token, apart from the run's, and reports its end with Attempt.Done;
	// a refusal by the throttle leaves the run as it is.
	LookupAttempt

	numKinds = 3
)

func (k AttemptKind) String() string {
	switch k {
	case FirstAttempt:
		return "first"
	case RetryAttempt:
		return "retry"
	case LookupAttempt:
		return "lookup"
	}
	return fmt.Sprintf("AttemptKind(%d)", uint8(k))
}

// Gate is a set of the admission checks an attempt passes before it is
// made (WithAdmission).
type Gate uint8

const (
	// GateLimiter takes a token of the shared limiter (WithLimiter).
	GateLimiter Gate = 1 << iota
	// GateBudget draws on the RetryBudget (WithBudget): a first attempt
	// deposits, a retry withdraws.
	GateBudget
	// GateThrottle asks the AdaptiveThrottle (WithThrottle).
	GateThrottle
	// GateBreaker asks the Breaker (WithBreaker).
	GateBreaker

	allGates = GateLimiter | GateBudget | GateThrottle | GateBreaker

	// throttleUnsent marks, in the gates passed, an attempt the throttle
	// admitted that is not yet counted as its request (not yet sent).
	throttleUnsent Gate = 1 << 7
)

// defaultGates is the admission of each kind without WithAdmission: a
// first attempt takes no limiter token (the limiter paces retries), a
// retry passes every gate, a lookup takes a token only.
var defaultGates = [numKinds]Gate{
	FirstAttempt:  GateBudget | GateThrottle | GateBreaker,
	RetryAttempt:  allGates,
	LookupAttempt: GateLimiter,
}

// Refusal is what a refusal by the budget, the throttle or the breaker
// does to the loop (WithRefusal).
type Refusal uint8

const (
	refuseDefault Refusal = iota
	// RefuseStop ends the loop: Verdict Stop, a *RetryError whose Reason
	// is the refusal (ErrBudgetExhausted, ErrThrottled or an error matching ErrBreakerOpen).
	RefuseStop
	// RefuseDefer counts the attempt as failed without sending it and
	// waits the policy's next delay (Verdict WaitFor, Reason the refusal);
	// the loop ends only when its policy runs out.
	RefuseDefer
	// RefuseDrop drops the work (Verdict Drop, Err a *RetryError whose
	// Reason is the refusal): for a queue whose callers learn of the
	// drop, not of a give-up.
	RefuseDrop
)

// refusalGate is the index of a gate that can refuse in config.refusal.
func refusalGate(g Gate) int {
	switch g {
	case GateBudget:
		return 0
	case GateThrottle:
		return 1
	case GateBreaker:
		return 2
	}
	return -1
}

// defaultRefusal is each refusing gate's rule without WithRefusal.
var defaultRefusal = [3]Refusal{RefuseStop, RefuseDefer, RefuseDefer}

// WithAdmission sets the gates an attempt of kind k passes before it is
// made (defaults: FirstAttempt GateBudget|GateThrottle|GateBreaker,
// RetryAttempt all four, LookupAttempt GateLimiter). A gate whose part is
// not configured (no WithLimiter, no WithBudget...) admits every attempt.
// An unknown kind or gate is an *ArgumentError.
func WithAdmission(k AttemptKind, g Gate) Option {
	return optionFunc(func(c *config) {
		switch {
		case k >= numKinds:
			c.bad("WithAdmission", "k", fmt.Sprintf("is %v: must be FirstAttempt, RetryAttempt or LookupAttempt", k))
		case k == LookupAttempt && g&(GateBudget|GateBreaker) != 0:
			c.bad("WithAdmission", "g", "may hold only GateLimiter and GateThrottle for LookupAttempt: a lookup is not an attempt of the run, so it neither draws on the budget nor holds a breaker admission")
		case g&^allGates != 0:
			c.bad("WithAdmission", "g", fmt.Sprintf("has unknown bits %#x: must be a set of GateLimiter, GateBudget, GateThrottle, GateBreaker", uint8(g&^allGates)))
		default:
			c.gates[k] = g
			c.gatesSet[k] = true
		}
	})
}

// WithRefusal sets what a refusal by gate g (GateBudget, GateThrottle or
// GateBreaker; the limiter never refuses, it makes the attempt wait) does:
// RefuseStop, RefuseDefer or RefuseDrop. Defaults: the budget stops, the
// throttle and the breaker defer. Anything else is an *ArgumentError.
func WithRefusal(g Gate, r Refusal) Option {
	return optionFunc(func(c *config) {
		i := refusalGate(g)
		switch {
		case i < 0:
			c.bad("WithRefusal", "g", fmt.Sprintf("is %#x: must be one of GateBudget, GateThrottle, GateBreaker", uint8(g)))
		case r < RefuseStop || r > RefuseDrop:
			c.bad("WithRefusal", "r", fmt.Sprintf("is %d: must be RefuseStop, RefuseDefer or RefuseDrop", r))
		default:
			c.refusal[i] = r
		}
	})
}

// gatesOf returns the admission of kind k.
func (c *config) gatesOf(k AttemptKind) Gate {
	if c.gatesSet[k] {
		return c.gates[k]
	}
	return defaultGates[k]
}

// refusalOf returns the rule of the refusing gate g.
func (c *config) refusalOf(g Gate) Refusal {
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
	return c.budget != nil && c.gatesOf(RetryAttempt)&GateBudget != 0 && c.refusalOf(GateBudget) == RefuseStop
}

// begin accounts for a run's first attempt at now: a deposit in the
// budget, a request for the throttle. It reports whether the throttle lets
// the attempt through (false: rejected locally, do not send it).
func (c *config) begin(now time.Time) bool {
	g := c.gatesOf(FirstAttempt)
	if c.budget != nil && g&GateBudget != 0 {
		c.budget.Deposit(now) // the work arrived (see ready)
	}
	return c.throttle == nil || g&GateThrottle == 0 || c.throttle.Allow(now)
}

// record gives the throttle an attempt's outcome.
func (c *config) record(err error, now time.Time) {
	if c.throttle != nil && (err == nil || !c.isTransient(err)) {
		c.throttle.Accepted(now)
	}
}
