package rebound

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// A Decision is what a loop does next. Read it in this order:
//
//   - Stop: the run is over. Err says why; it is nil after a success.
//   - Delay > 0: wait Delay, then call Admit again.
//   - Delay 0 (only from Admit): the attempt is admitted. Make it now.
//
// A wait always has a Delay above 0, and Done never admits.
type Decision struct {
	// Stop reports that the run is over (until Reset).
	Stop bool
	// Delay is how long to wait before the next Admit.
	Delay time.Duration
	// Reason is the local refusal that made Admit wait or stop:
	// ErrThrottled, ErrBudgetExhausted, or an error matching
	// ErrBreakerOpen. It is nil after a failure and for a limiter's token.
	Reason error
	// Err is why the run stops or the work is dropped. It is a
	// *RetryError, or the attempt's own error when it is not retried.
	Err error
	// Attempt is the number of failed attempts of the run, refusals
	// included.
	Attempt int

	drop bool // a refusal under admit.Drop: no EventGiveUp
}

// An Attempt is an attempt that Admit let start. Report its end with
// Done, once. The zero Attempt is none. An attempt of the run is
// outstanding until its Done, Cancel, Reset or the run's next admission;
// the Done of one that is not changes nothing.
type Attempt struct {
	s    *Schedule
	kind attemptKind
	gen  uint32 // the Schedule's count at admission
}

// Admit asks, at now, whether the run's next attempt may start. It is a
// first attempt after NewSchedule, Reset or a success, else a retry
// (after a failure, a local refusal or Resume).
// When admitted, the Decision's Delay is 0 and the returned Attempt is
// not the zero Attempt (Decision.Attempt counts failures: 0 at first).
// The gates, rules and hooks are in docs/engine.md.
func (s *Schedule) Admit(now time.Time) (Attempt, Decision) {
	return s.admit(now, s.kind())
}

// kind is the kind of the run's next attempt: a retry once the run has
// failed (or been refused) at least once, or was restored (Resume).
func (s *Schedule) kind() attemptKind {
	if s.attempts > 0 || s.resumed {
		return kindRetry
	}
	return kindFirst
}

// lookup asks, at now, for a read beside the run (admit.Lookup).
func (s *Schedule) lookup(now time.Time) (Attempt, Decision) { return s.admit(now, kindLookup) }

// admit is Admit for an attempt of kind k.
func (s *Schedule) admit(now time.Time, k attemptKind) (Attempt, Decision) {
	if s.c == nil {
		return Attempt{}, Decision{Stop: true, Err: &ArgumentError{Func: "rebound.Schedule.Admit", Arg: "s",
			Reason: "is a zero Schedule, which admits nothing"}}
	}
	if k != kindLookup && s.ended != nil {
		return Attempt{}, s.endedDecision()
	}
	d := s.admission(k, now, true)
	if k != kindLookup {
		s.end(d) // before the hooks: one that panics leaves the run ended
	}
	switch {
	case d.Stop:
		if k != kindLookup && !d.drop { // a refused lookup ends no run; the loop reports a drop
			d.Err = s.gaveUp(d.Err, now)
		}
	case d.Delay == 0:
		if k != kindLookup {
			s.gen++ // an attempt admitted before is no longer outstanding
		}
		return Attempt{s: s, kind: k, gen: s.gen}, d
	}
	return Attempt{}, d
}

// Done reports, at now, that the attempt ended with err (nil: success).
// After a failure it returns a wait for the backoff, or a stop. After a
// success it stops with a nil Err, and the next Admit starts a new run.
func (a Attempt) Done(err error, now time.Time) Decision {
	s := a.s
	if s == nil {
		return Decision{Stop: true, Err: errZeroAttempt}
	}
	if a.kind == kindLookup {
		// A lookup is beside the run. An answer teaches the throttle
		// that the backend accepts requests.
		if s.c.gatesOf(kindLookup)&gateThrottle != 0 {
			s.c.record(err, now)
		}
		return Decision{Stop: true, Attempt: s.attempts}
	}
	if a.gen != s.gen {
		return Decision{Stop: true, Err: errStaleAttempt, Attempt: s.attempts}
	}
	s.gen++ // reported: no longer outstanding
	if err == nil {
		s.succeeded(now)
		return Decision{Stop: true}
	}
	d, stop := s.failed(err, now)
	if stop != nil {
		return Decision{Stop: true, Err: stop, Attempt: s.attempts}
	}
	return Decision{Delay: d, Attempt: s.attempts}
}

// errZeroAttempt is the Done of the zero Attempt (made once: a refused
// attempt's Done in a hot loop allocates nothing).
var errZeroAttempt = &ArgumentError{Func: "rebound.Attempt.Done", Arg: "a",
	Reason: "is the zero Attempt: Admit returns one when it admits"}

// errStaleAttempt is the Done of an Attempt that is not outstanding.
var errStaleAttempt = &ArgumentError{Func: "rebound.Attempt.Done", Arg: "a",
	Reason: "is not the run's outstanding attempt: an Attempt is reported once, before Cancel, Reset or the next admission"}

// succeeded reports a success at now and starts a new run.
func (s *Schedule) succeeded(now time.Time) {
	e := Event{Attempt: s.nextCount(), LimiterWait: s.limWait, Elapsed: s.elapsed(now)}
	// The breaker and the throttle hear the success before the hooks, so
	// that a hook that panics leaves no admission held.
	s.res = nil // the token was used by the attempt
	s.endAttempt(nil)
	s.c.record(nil, now)
	s.reset(now)
	if s.c.observed() {
		s.c.emitAttempted(e)
		if e.Attempt > 1 {
			s.c.emitRecovered(e)
		}
	}
}

// failed reports a failure with err at now, with its hooks: Attempted,
// then Retried or GaveUp.
func (s *Schedule) failed(err error, now time.Time) (time.Duration, error) {
	if !s.c.observed() {
		d, stop := s.next(err, now)
		if stop != nil {
			s.ended = stop
		}
		return d, stop
	}
	attempt, lw := s.nextCount(), s.limWait
	d, stop := s.next(err, now)
	if stop != nil {
		s.ended = stop
	}
	el := s.elapsed(now)
	s.c.emitAttempted(Event{Attempt: attempt, Err: err, LimiterWait: lw, Elapsed: el})
	if stop != nil {
		s.c.emitGaveUp(Event{Attempt: attempt, Err: stop, Elapsed: el})
	} else {
		s.c.emitRetried(Event{Attempt: attempt, Err: err, Delay: d, Elapsed: el})
	}
	return d, stop
}

// next is the rule of a failure with err at now: the delay, or the stop.
func (s *Schedule) next(err error, now time.Time) (time.Duration, error) {
	s.endAttempt(err)
	s.attempts = s.nextCount()
	s.limWait = 0
	s.passed = 0
	s.res = nil // a token reserved for the attempt that just failed was used
	if err != nil {
		s.last = err
		if perm := asPermanent(err); perm != nil {
			s.c.record(err, now)
			if perm.Err == nil { // a mark with no error: stop with the mark itself
				return 0, err
			}
			return 0, perm.Err
		}
	}
	p, l := &s.d.p, &s.c.limits
	if l.maxAttempts > 0 && s.attempts >= l.maxAttempts {
		return 0, s.stop(ErrExhausted)
	}
	d := s.d.draw(s.attempts - 1)
	drawn := d
	var ra time.Duration // the Retry-After asked, when it raised the delay
	if err != nil {
		if v, ok := RetryAfterDelay(err); ok && min(v, p.MaxRetryAfter) > d {
			ra, d = v, min(v, p.MaxRetryAfter)
		}
	}
	if l.maxElapsed > 0 && now.Add(d).Sub(s.start) > l.maxElapsed {
		if ra > 0 && now.Add(drawn).Sub(s.start) <= l.maxElapsed { // the Retry-After caused the stop
			return 0, s.stop(retryAfterBeyond(ra, l.maxElapsed))
		}
		return 0, s.stop(ErrExhausted)
	}
	if s.c.budgetAtFailure() && !s.c.budget.tryWithdraw(now) {
		return 0, s.stop(ErrBudgetExhausted)
	}
	return d, nil
}

// nextCount is the run's failure count after one more failure. It stops
// at math.MaxInt: a run resumed with a huge count (Resume) never wraps to
// a negative count, which would read as a new run.
func (s *Schedule) nextCount() int {
	if s.attempts == math.MaxInt {
		return s.attempts
	}
	return s.attempts + 1
}

// retryAfterBeyond is the reason of a stop caused by a Retry-After.
func retryAfterBeyond(ra, maxElapsed time.Duration) error {
	return fmt.Errorf("%w: server asked to retry after %v, beyond MaxElapsed %v", ErrExhausted, ra, maxElapsed)
}

// refuse counts the attempt due at now as refused locally for reason, as
// the refuseDefer rule does: a failed attempt that was not sent, reported
// to Throttled. It returns the next delay, or the stop.
func (s *Schedule) refuse(reason error, now time.Time) (time.Duration, error) {
	s.cancel(now) // a token held for the refused attempt is not used
	s.passed = 0
	s.attempts = s.nextCount()
	s.last = reason
	s.limWait = 0
	l := &s.c.limits
	var d time.Duration
	var stop error
	if l.maxAttempts > 0 && s.attempts >= l.maxAttempts {
		stop = s.stop(ErrExhausted)
	} else if d = s.d.draw(s.attempts - 1); l.maxElapsed > 0 && now.Add(d).Sub(s.start) > l.maxElapsed {
		d, stop = 0, s.stop(ErrExhausted)
	}
	if s.c.observed() {
		s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Delay: d, Elapsed: s.elapsed(now)})
	}
	return d, stop
}

// gaveUp reports stop to the GaveUp hooks, as a stop that ends no attempt
// (Event.Waiting), and returns it.
func (s *Schedule) gaveUp(stop error, now time.Time) error {
	if s.c.observed() {
		s.c.emitGaveUp(Event{Attempt: s.attempts, Err: stop, Waiting: true, Elapsed: s.elapsed(now)})
	}
	return stop
}

// end records a Decision that ends the run (Stop): an Admit that comes
// after it (a heap scheduler's stale wake-up) gets it again, until Reset.
func (s *Schedule) end(d Decision) {
	if d.Stop {
		s.ended = d.Err
	}
}

// endedDecision is the Decision of an Admit after the run ended: the same
// verdict and error, reported to no hook again.
func (s *Schedule) endedDecision() Decision {
	return Decision{Stop: true, Err: s.ended, Attempt: s.attempts}
}

// admission is the admission of an attempt of kind k due at now; late
// tells whether a retry that comes due after MaxElapsed is stopped. The
// blocking loop (Retrier.Do) asks with late false: it slept
// exactly the delays the Schedule gave, each checked against MaxElapsed
// when it was drawn, so a retry it finds past MaxElapsed is one its timer
// fired a little late, which a loop without gates makes too.
func (s *Schedule) admission(k attemptKind, now time.Time, late bool) Decision {
	c := s.c
	// MaxElapsed bounds when an attempt STARTS: a retry that comes due
	// after it (a scheduler whose workers were busy) is not made.
	if me := s.c.maxElapsed; late && k == kindRetry && me > 0 && now.Sub(s.start) > me {
		s.cancel(now)
		return Decision{Stop: true, Err: s.stop(fmt.Errorf("%w: the retry came due %v after MaxElapsed %v",
			ErrExhausted, now.Sub(s.start)-me, me)), Attempt: s.attempts}
	}
	if ma := s.c.maxAttempts; k != kindLookup && ma > 0 && s.attempts >= ma {
		// A run resumed (Resume) past MaxAttempts: stopped as a failure
		// past it is.
		s.cancel(now)
		return Decision{Stop: true, Err: s.stop(ErrExhausted), Attempt: s.attempts}
	}
	g := c.gatesOf(k)
	// A lookup is beside the run: its token and the gates it passed are
	// its own.
	res, passed := &s.res, &s.passed
	if k == kindLookup {
		res, passed = &s.lres, &s.lpassed
	}
	budget := g&gateBudget != 0 && c.budget != nil && *passed&gateBudget == 0
	if budget && k == kindFirst {
		// A deposit is the arrival of work: made whether or not the
		// throttle lets this attempt out (a caller may send it anyway).
		c.budget.deposit(now)
		*passed |= gateBudget
		budget = false
	}
	// The throttle before the budget's withdrawal: a retry the throttle
	// refuses is not sent, so it must not spend a retry of the budget.
	// An attempt the throttle admits is counted as its request when it is
	// sent (throttleUnsent until then): one a later gate refuses is not.
	if g&gateThrottle != 0 && c.throttle != nil && *passed&gateThrottle == 0 {
		if !c.throttle.admit(now) {
			if k == kindLookup {
				return s.refusedLookup(ErrThrottled, now)
			}
			return s.refused(gateThrottle, ErrThrottled, now)
		}
		*passed |= gateThrottle | throttleUnsent
	}
	if budget && k == kindRetry {
		if !c.budgetAtFailure() && !c.budget.tryWithdraw(now) {
			return s.refused(gateBudget, ErrBudgetExhausted, now)
		}
		*passed |= gateBudget
	}
	if g&gateLimiter != 0 && c.limiter != nil {
		if d, wait := s.token(k, res, now); wait {
			return d
		}
	}
	if g&gateBreaker != 0 && c.breaker != nil && s.done == nil {
		done, err := c.breaker.Allow()
		if err != nil {
			return s.refused(gateBreaker, &breakerError{Err: err}, now)
		}
		s.done = done
	}
	s.send(passed, now)
	if k == kindLookup {
		// A lookup is not an attempt of the run: its token is used now.
		s.lres, s.lpassed = nil, 0
	}
	return Decision{Attempt: s.attempts}
}

// send counts, at now, the attempt that starts as the throttle's request,
// if the throttle admitted it (*passed holds throttleUnsent).
func (s *Schedule) send(passed *gate, now time.Time) {
	if *passed&throttleUnsent != 0 {
		*passed &^= throttleUnsent
		s.c.throttle.sent(now)
	}
}

// token takes the limiter token of an attempt of kind k at now, into
// *res. It reports whether the attempt waits for it (or stops), and the
// Decision that says so.
func (s *Schedule) token(k attemptKind, res **rate.Reservation, now time.Time) (Decision, bool) {
	if *res == nil {
		*res = s.c.limiter.ReserveN(now, 1)
		if !(*res).OK() { // the limiter's burst was set to 0 after WithLimiter checked it
			*res = nil
			return Decision{Stop: true, Err: s.stop(fmt.Errorf("%w: retry limiter can never grant a token", ErrExhausted)), Attempt: s.attempts}, true
		}
		if k != kindLookup {
			s.limWait = (*res).DelayFrom(now)
		}
	}
	w := (*res).DelayFrom(now)
	if me := s.c.maxElapsed; k != kindLookup && me > 0 && w > 0 && now.Add(w).Sub(s.start) > me {
		s.cancel(now)
		s.passed = 0
		return Decision{Stop: true, Err: s.stop(fmt.Errorf("%w: the retry limiter's next token comes %v after MaxElapsed %v",
			ErrExhausted, now.Add(w).Sub(s.start)-me, me)), Attempt: s.attempts}, true
	}
	if w > 0 {
		return Decision{Delay: w, Attempt: s.attempts}, true
	}
	return Decision{}, false
}

// refused applies gate g's rule (withRefusal) to the attempt it refused at
// now for reason.
func (s *Schedule) refused(g gate, reason error, now time.Time) Decision {
	switch s.c.refusalOf(g) {
	case refuseDefer:
		d, stop := s.refuse(reason, now)
		if stop != nil {
			return Decision{Stop: true, Err: stop, Reason: reason, Attempt: s.attempts}
		}
		return Decision{Delay: d, Reason: reason, Attempt: s.attempts}
	case refuseDrop:
		s.cancel(now)
		s.passed = 0
		if s.c.observed() {
			s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Elapsed: s.elapsed(now)})
		}
		return Decision{Stop: true, Err: s.stop(reason), Reason: reason, Attempt: s.attempts, drop: true}
	default: // refuseStop
		s.cancel(now)
		s.passed = 0
		if s.c.observed() { // a local rejection, as under the other rules (Delay 0: GaveUp follows)
			s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Elapsed: s.elapsed(now)})
		}
		return Decision{Stop: true, Err: s.stop(reason), Reason: reason, Attempt: s.attempts}
	}
}

// refusedLookup applies the throttle's rule to the lookup it refused at
// now for reason. The run is untouched: no attempt counted, the run's
// token and breaker admission kept. Under refuseDefer the lookup waits a
// draw of the policy's first delay (firstDelay) and asks again.
func (s *Schedule) refusedLookup(reason error, now time.Time) Decision {
	s.lpassed = 0 // the throttle is asked first: no token is held yet
	var d time.Duration
	r := s.c.refusalOf(gateThrottle)
	if r == refuseDefer {
		d = s.firstDelay()
	}
	if s.c.observed() {
		s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Delay: d, Elapsed: s.elapsed(now)})
	}
	if r == refuseDefer {
		return Decision{Delay: d, Reason: reason, Attempt: s.attempts}
	}
	return Decision{Stop: true, Err: s.stop(reason), Reason: reason, Attempt: s.attempts}
}
