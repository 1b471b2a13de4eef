package rebound

import (
	"errors"
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
	// token, apart from the run's, and reports its end with LookedUp; a
	// refusal by the throttle leaves the run as it is.
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
	// is the refusal (ErrBudgetExhausted, ErrThrottled or a *BreakerError).
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

// Verdict is what a loop does next (Decision.Verdict).
type Verdict uint8

const (
	// AttemptNow: make the attempt now. A limiter token and a breaker
	// admission are held for it: report its end with Failed or Succeeded,
	// or Abandoned if it will not be made.
	AttemptNow Verdict = iota
	// WaitFor: ask again (Ready) after Decision.Delay; Decision.Reason
	// says why.
	WaitFor
	// Stop: the loop ends with Decision.Err. A Ready of the run (a
	// first attempt or a retry), Begin, Admit or Wait that comes after it
	// (a stale wake-up) returns it again, reported to no hook, until
	// Reset: no attempt is admitted past the end.
	Stop
	// Drop: a refusal under RefuseDrop; the work is dropped
	// (Decision.Err says why). It ends the run as Stop does.
	Drop
	// Idle: nothing is due; the loop asks again (Ready) when it has a
	// reason to make an attempt.
	Idle
)

func (v Verdict) String() string {
	switch v {
	case AttemptNow:
		return "attempt now"
	case WaitFor:
		return "wait"
	case Stop:
		return "stop"
	case Drop:
		return "drop"
	case Idle:
		return "idle"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// ErrLimited is the Decision.Reason of a wait for a limiter token.
var ErrLimited = errors.New("rebound: waiting for a retry limiter token")

// A Decision is what Decide returns: what the loop does next.
type Decision struct {
	Verdict Verdict
	// Delay is how long to wait (WaitFor).
	Delay time.Duration
	// Reason says why the loop waits (WaitFor): nil for the backoff after
	// a failure, ErrLimited for a limiter token, the refusal
	// (ErrThrottled, ErrBudgetExhausted, a *BreakerError) for an attempt
	// deferred without being sent.
	Reason error
	// Err is why the loop ends (Stop: a *RetryError, or the attempt's own
	// error when it is not retried) or the work is dropped (Drop).
	Err error
	// Attempt is the number of failed attempts of the run so far, local
	// refusals included.
	Attempt int
}

// A Step is what happened, given to Decide: Ready, Failed, Succeeded or
// Abandoned.
type Step struct {
	op   stepOp
	kind AttemptKind
	err  error
}

type stepOp uint8

const (
	opReady stepOp = iota
	opFailed
	opSucceeded
	opAbandoned
	opLookedUp
)

// Ready is the Step of an attempt of kind k that is due now.
func Ready(k AttemptKind) Step { return Step{op: opReady, kind: k} }

// Failed is the Step of an attempt that failed with err (nil: a transient
// failure of unknown cause).
func Failed(err error) Step { return Step{op: opFailed, err: err} }

// Succeeded is the Step of an attempt that succeeded.
func Succeeded() Step { return Step{op: opSucceeded} }

// Abandoned is the Step of an admitted attempt that will not be made: its
// limiter token and breaker admission are given back, and the token a
// lookup holds.
func Abandoned() Step { return Step{op: opAbandoned} }

// LookedUp is the Step of a lookup (admitted by Ready(LookupAttempt))
// that ended with err (nil: it succeeded). With the throttle in the
// lookup's admission, its outcome is recorded as an attempt's is (nil or
// an error that is not transient is an accept), so that lookups the
// backend answers do not teach the throttle that it rejects them. The run
// is untouched.
func LookedUp(err error) Step { return Step{op: opLookedUp, kind: LookupAttempt, err: err} }

// Decide is the step function of rebound: given what happened at now, it
// returns what the loop does next. Every loop of the tree runs on it.
//
//   - Ready(k): admission. The gates of kind k (WithAdmission) are asked
//     in order budget deposit (a first attempt), throttle, budget withdrawal
//     (a retry), limiter, breaker, each once per attempt
//     however often Ready is repeated. AttemptNow; WaitFor (a token wait,
//     Reason ErrLimited, or a deferred refusal); Stop or Drop (a refusal
//     under RefuseStop or RefuseDrop, or a token that comes after
//     MaxElapsed).
//   - Failed(err): classification and the delay. WaitFor the backoff
//     (raised to a Retry-After), or Stop: the error unwrapped from
//     Permanent, the error a classifier does not call transient, or a
//     *RetryError (MaxAttempts, MaxElapsed, a budget under RefuseStop).
//   - Succeeded(): the run is over (an accept for the throttle, the
//     sequence reset). Idle.
//   - Abandoned(): the admitted attempt will not be made. Idle.
//   - LookedUp(err): a lookup ended (its outcome for the throttle). Idle.
//
// Hooks are reported as by the methods it replaces (Attempted, Retried,
// GaveUp, Recovered, Throttled), once each: every refusal to Throttled,
// a Stop to GaveUp, a Drop to Throttled alone (the loop reports the drop;
// Admit, for its callers, reports it to GaveUp too). Decide allocates
// nothing without a limiter.
func (s *Schedule) Decide(now time.Time, st Step) Decision {
	if err := s.unmade("Decide"); err != nil {
		return Decision{Verdict: Stop, Err: err}
	}
	switch st.op {
	case opReady:
		if st.kind >= numKinds {
			return Decision{Verdict: Stop, Err: &ArgumentError{Func: "rebound.Schedule.Decide", Arg: "st",
				Reason: fmt.Sprintf("is Ready(%v): the kind must be FirstAttempt, RetryAttempt or LookupAttempt", st.kind)}, Attempt: s.attempts}
		}
		if st.kind != LookupAttempt && s.ended != nil {
			s.thrott = false // nothing was asked: nothing rejected
			return s.endedDecision()
		}
		d := s.ready(st.kind, now)
		if st.kind != LookupAttempt {
			s.end(d) // before the hooks: one that panics leaves the run ended
		}
		if d.Verdict == Stop {
			d.Err = s.gaveUp(d.Err, now)
		}
		return d
	case opFailed:
		d, stop := s.Next(st.err, now)
		if stop != nil {
			return Decision{Verdict: Stop, Err: stop, Attempt: s.attempts}
		}
		return Decision{Verdict: WaitFor, Delay: d, Attempt: s.attempts}
	case opSucceeded:
		s.Succeeded(now)
		return Decision{Verdict: Idle}
	case opLookedUp:
		if s.c.gatesOf(LookupAttempt)&GateThrottle != 0 {
			s.c.record(st.err, now)
		}
		return Decision{Verdict: Idle, Attempt: s.attempts}
	default:
		s.Cancel(now)
		s.cancelLookup(now)
		s.passed = 0
		return Decision{Verdict: Idle, Attempt: s.attempts}
	}
}

// end records a Decision that ends the run (Stop, Drop): a Ready, Begin or
// Admit that comes after it (a heap scheduler's stale wake-up) gets it
// again, until Reset.
func (s *Schedule) end(d Decision) {
	if d.Verdict == Stop || d.Verdict == Drop {
		s.ended, s.endedDrop = d.Err, d.Verdict == Drop
	}
}

// endedDecision is the Decision of a Ready after the run ended: the same
// verdict and error, reported to no hook again.
func (s *Schedule) endedDecision() Decision {
	v := Stop
	if s.endedDrop {
		v = Drop
	}
	return Decision{Verdict: v, Err: s.ended, Attempt: s.attempts}
}

// ready is the admission of an attempt of kind k due at now.
func (s *Schedule) ready(k AttemptKind, now time.Time) Decision { return s.admission(k, now, true) }

// admission is ready; late tells whether a retry that comes due after
// MaxElapsed is stopped. Schedule.Wait asks with late false: it slept
// exactly the delays the Schedule gave, each checked against MaxElapsed
// when it was drawn, so a retry it finds past MaxElapsed is one its timer
// fired a little late, which a loop without gates makes too.
func (s *Schedule) admission(k AttemptKind, now time.Time, late bool) Decision {
	s.thrott = false
	c := s.c
	// MaxElapsed bounds when an attempt STARTS: a retry that comes due
	// after it (a scheduler whose workers were busy) is not made.
	if me := s.d.p.MaxElapsed; late && k == RetryAttempt && me > 0 && now.Sub(s.start) > me {
		s.Cancel(now)
		return Decision{Verdict: Stop, Err: s.stop(fmt.Errorf("%w: the retry came due %v after MaxElapsed %v",
			ErrExhausted, now.Sub(s.start)-me, me)), Attempt: s.attempts}
	}
	g := c.gatesOf(k)
	// A lookup is beside the run: its token and the gates it passed are
	// its own.
	res, passed := &s.res, &s.passed
	if k == LookupAttempt {
		res, passed = &s.lres, &s.lpassed
	}
	budget := g&GateBudget != 0 && c.budget != nil && *passed&GateBudget == 0
	if budget && k == FirstAttempt {
		// A deposit is the arrival of work: made whether or not the
		// throttle lets this attempt out (a caller may send it anyway).
		c.budget.Deposit(now)
		*passed |= GateBudget
		budget = false
	}
	// The throttle before the budget's withdrawal: a retry the throttle
	// refuses is not sent, so it must not spend a retry of the budget.
	admitted := false // by the throttle, now: counted as its request once the budget lets it through
	if g&GateThrottle != 0 && c.throttle != nil && *passed&GateThrottle == 0 {
		if !c.throttle.admit(now) {
			if k == LookupAttempt {
				return s.refusedLookup(ErrThrottled, now)
			}
			return s.refused(GateThrottle, ErrThrottled, now)
		}
		*passed |= GateThrottle
		admitted = true
	}
	if budget && k == RetryAttempt {
		if !c.budgetAtFailure() && !c.budget.TryWithdraw(now) {
			return s.refused(GateBudget, ErrBudgetExhausted, now)
		}
		*passed |= GateBudget
	}
	if admitted {
		c.throttle.sent(now) // not refused by the budget: a request (a refusal by the budget is not)
	}
	if g&GateLimiter != 0 && c.limiter != nil {
		if *res == nil {
			*res = c.limiter.ReserveN(now, 1)
			if !(*res).OK() { // the limiter's burst was set to 0 after WithLimiter checked it
				*res = nil
				return Decision{Verdict: Stop, Err: s.stop(fmt.Errorf("%w: retry limiter can never grant a token", ErrExhausted)), Attempt: s.attempts}
			}
			if k != LookupAttempt {
				s.limWait = (*res).DelayFrom(now)
			}
		}
		w := (*res).DelayFrom(now)
		if me := s.d.p.MaxElapsed; k != LookupAttempt && me > 0 && w > 0 && now.Add(w).Sub(s.start) > me {
			s.Cancel(now)
			s.passed = 0
			return Decision{Verdict: Stop, Err: s.stop(fmt.Errorf("%w: the retry limiter's next token comes %v after MaxElapsed %v",
				ErrExhausted, now.Add(w).Sub(s.start)-me, me)), Attempt: s.attempts}
		}
		if w > 0 {
			return Decision{Verdict: WaitFor, Delay: w, Reason: ErrLimited, Attempt: s.attempts}
		}
	}
	if g&GateBreaker != 0 && c.breaker != nil && s.done == nil {
		done, err := c.breaker.Allow()
		if err != nil {
			return s.refused(GateBreaker, &BreakerError{Err: err}, now)
		}
		s.done = done
	}
	if k == LookupAttempt {
		// A lookup is not an attempt of the run: its token is used now.
		s.lres, s.lpassed = nil, 0
	}
	return Decision{Verdict: AttemptNow, Attempt: s.attempts}
}

// refused applies gate g's rule (WithRefusal) to the attempt it refused at
// now for reason.
func (s *Schedule) refused(g Gate, reason error, now time.Time) Decision {
	switch s.c.refusalOf(g) {
	case RefuseDefer:
		d, stop := s.refuse(reason, now)
		if stop != nil {
			return Decision{Verdict: Stop, Err: stop, Attempt: s.attempts}
		}
		return Decision{Verdict: WaitFor, Delay: d, Reason: reason, Attempt: s.attempts}
	case RefuseDrop:
		s.Cancel(now)
		s.thrott, s.passed = true, 0
		if s.c.observed() {
			s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Elapsed: now.Sub(s.start)})
		}
		return Decision{Verdict: Drop, Err: &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}, Attempt: s.attempts}
	default: // RefuseStop
		s.Cancel(now)
		s.thrott, s.passed = true, 0
		if s.c.observed() { // a local rejection, as under the other rules (Delay 0: GaveUp follows)
			s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Elapsed: now.Sub(s.start)})
		}
		return Decision{Verdict: Stop, Err: &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}, Attempt: s.attempts}
	}
}

// refusedLookup applies the throttle's rule to the lookup it refused at
// now for reason. The run is untouched: no attempt counted, the run's
// token and breaker admission kept. Under RefuseDefer the lookup waits a
// draw of the policy's first delay (FirstDelay) and asks again.
func (s *Schedule) refusedLookup(reason error, now time.Time) Decision {
	s.thrott, s.lpassed = true, 0 // the throttle is asked first: no token is held yet
	var d time.Duration
	r := s.c.refusalOf(GateThrottle)
	if r == RefuseDefer {
		d = s.FirstDelay()
	}
	if s.c.observed() {
		s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Delay: d, Elapsed: now.Sub(s.start)})
	}
	switch r {
	case RefuseDefer:
		return Decision{Verdict: WaitFor, Delay: d, Reason: reason, Attempt: s.attempts}
	case RefuseDrop:
		return Decision{Verdict: Drop, Err: &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}, Attempt: s.attempts}
	default:
		return Decision{Verdict: Stop, Err: &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}, Attempt: s.attempts}
	}
}

// cancelLookup gives back, at now, the token a lookup holds.
func (s *Schedule) cancelLookup(now time.Time) {
	if s.lres != nil {
		s.lres.CancelAt(now)
		s.lres = nil
	}
	s.lpassed = 0
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
