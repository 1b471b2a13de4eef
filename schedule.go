package rebound

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"
)

// A Schedule decides, for one retry loop, whether and when the next attempt
// runs: Decide is the step function of rebound, and Retry, Retrier.Do and
// the loops of subscriber, failback and the registrations all run on it;
// none of them counts attempts, draws a delay or asks a limiter itself.
//
// A loop reports what happened (Ready, Failed, Succeeded, Abandoned) and
// does what the Decision says (attempt now, wait, stop, drop, idle). Time
// is passed in, so a Schedule runs in virtual time too; only Wait reads
// the clock (WithClock). A Schedule is not safe for concurrent use: one
// per loop, built with Retrier.NewSchedule (a zero Schedule's methods
// return an *ArgumentError). The order of the rules
// (classification, MaxAttempts, delay and Retry-After, MaxElapsed,
// admission) and the blocking form are in docs/engine.md.
type Schedule struct {
	c         *config
	d         drawer
	start     time.Time
	attempts  int   // failed attempts reported to Next since Reset
	last      error // the last error given to Next
	res       *rate.Reservation
	limWait   time.Duration
	passed    Gate              // the gates the attempt that is due has passed (decide.go)
	lres      *rate.Reservation // the token held for a lookup (LookupAttempt)
	lpassed   Gate              // the gates the lookup that is due has passed
	thrott    bool              // the last Begin or Admit rejected its attempt locally
	ended     error             // the stop (or drop) that ended the run, until Reset
	endedDrop bool

	done func(error) // the Breaker's report for the admitted attempt (breaker.go)
}

// unmade returns the *ArgumentError of method fn called on a Schedule not
// made by Retrier.NewSchedule (a zero Schedule), nil for one that was.
func (s *Schedule) unmade(fn string) error {
	if s.c != nil {
		return nil
	}
	return &ArgumentError{Func: "rebound.Schedule." + fn, Arg: "s", Reason: "is a zero Schedule: make it with Retrier.NewSchedule"}
}

// init prepares s for a loop of r starting at now. k numbers the
// schedules of r (see WithSeed).
func (s *Schedule) init(c *config, p Policy, seed uint64, seeded bool, now time.Time) {
	s.c = c
	s.d.init(p, seed, seeded)
	s.start = now
}

// Reset starts a new run of the loop at now: no attempt counted, the delay
// sequence from its first step, MaxElapsed measured from now, a token
// reserved by Admit (or for a lookup) for an attempt that will not run
// given back. Call it before the first attempt of every run (a
// subscription confirming itself again after a disruption); Succeeded
// calls it after a success (keeping a lookup's token).
func (s *Schedule) Reset(now time.Time) {
	s.cancelLookup(now)
	s.reset(now)
}

func (s *Schedule) reset(now time.Time) {
	s.Cancel(now)
	s.attempts = 0
	s.last = nil
	s.limWait = 0
	s.passed, s.thrott = 0, false
	s.ended, s.endedDrop = nil, false
	s.d.reset()
	s.start = now
}

// Succeeded reports that the last attempt succeeded at now (an accept for
// the AdaptiveThrottle), and resets the schedule (see Reset) for the next
// run.
//
// With hooks it reports the attempt: Attempted, and Recovered if earlier
// attempts of the run failed.
func (s *Schedule) Succeeded(now time.Time) {
	if s.c == nil { // a zero Schedule: nothing to report to
		return
	}
	e := Event{Attempt: s.attempts + 1, LimiterWait: s.limWait, Elapsed: now.Sub(s.start)}
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

// Begin is Decide(now, Ready(FirstAttempt)) in the (delay, stop) form of
// Next: 0 and nil to send the first attempt, a backoff delay after a local
// refusal (Throttled true; Admit after it, as for a retry), or the stop.
func (s *Schedule) Begin(now time.Time) (time.Duration, error) {
	if err := s.unmade("Begin"); err != nil {
		return 0, err
	}
	if s.ended != nil {
		s.thrott = false // nothing was asked: nothing rejected
		return 0, s.ended
	}
	return s.legacy(s.ready(FirstAttempt, now), now)
}

// legacy maps a Decision of Ready onto the (delay, stop) of Begin and
// Admit.
func (s *Schedule) legacy(d Decision, now time.Time) (time.Duration, error) {
	s.end(d)
	switch d.Verdict {
	case WaitFor:
		return d.Delay, nil
	case Stop, Drop:
		return 0, s.gaveUp(d.Err, now)
	}
	return 0, nil
}

// Refuse counts the attempt due at now as refused locally for reason, as
// the RefuseDefer rule does (docs/engine.md): a failed attempt that was
// not sent, reported to Throttled; it returns the policy's next delay, or
// the stop when the policy allows no further attempt.
func (s *Schedule) Refuse(reason error, now time.Time) (time.Duration, error) {
	if err := s.unmade("Refuse"); err != nil {
		return 0, err
	}
	d, stop := s.refuse(reason, now)
	if stop != nil {
		s.ended = stop
		return 0, s.gaveUp(stop, now)
	}
	return d, nil
}

func (s *Schedule) refuse(reason error, now time.Time) (time.Duration, error) {
	s.Cancel(now) // a token held for the refused attempt is not used
	s.thrott, s.passed = true, 0
	s.attempts++
	s.last = reason
	s.limWait = 0
	p := &s.d.p
	var d time.Duration
	var stop error
	if p.MaxAttempts > 0 && s.attempts >= p.MaxAttempts {
		stop = s.stop(ErrExhausted)
	} else if d = s.d.draw(s.attempts - 1); p.MaxElapsed > 0 && now.Add(d).Sub(s.start) > p.MaxElapsed {
		d, stop = 0, s.stop(ErrExhausted)
	}
	if s.c.observed() {
		s.c.emitThrottled(Event{Attempt: s.attempts, Err: reason, Delay: d, Elapsed: now.Sub(s.start)})
	}
	return d, stop
}

// Throttled reports whether the last Begin or Admit rejected its attempt
// locally (AdaptiveThrottle): the attempt must not be sent, and the
// duration they returned is a backoff delay, not a limiter wait.
func (s *Schedule) Throttled() bool { return s.thrott }

// gaveUp reports stop to the GaveUp hooks, as a stop that ends no attempt
// (Event.Waiting), and returns it.
func (s *Schedule) gaveUp(stop error, now time.Time) error {
	if s.c.observed() {
		s.c.emitGaveUp(Event{Attempt: s.attempts, Err: stop, Waiting: true, Elapsed: now.Sub(s.start)})
	}
	return stop
}

// Attempts returns the number of failed attempts reported to Next since
// the last Reset (each Next call reports one).
func (s *Schedule) Attempts() int { return s.attempts }

// Start returns the start of the current run: the time given to
// NewSchedule or to the last Reset. MaxElapsed is measured from it.
func (s *Schedule) Start() time.Time { return s.start }

// LimiterWait returns how long the last Admit asked the attempt to wait
// for its limiter token (0 without a limiter). Hooks report it as
// Event.LimiterWait.
func (s *Schedule) LimiterWait() time.Duration { return s.limWait }

// Next reports that an attempt failed with err at now, and returns the
// delay before the next attempt, or a non-nil stop error (then the loop
// ends and returns stop). stop is the attempt's own error (unwrapped from
// Permanent) when it is not worth retrying, and a *RetryError otherwise
// (Reason ErrExhausted). A nil err counts as a transient failure of unknown
// cause. The delay is always at least MinDelay. The rules are in docs/engine.md.
//
// With hooks (WithObserver on the Retrier), Next reports the
// attempt: Attempted, then Retried (with the delay) or GaveUp (with stop),
// so a loop built on a Schedule is observed like Retry.
func (s *Schedule) Next(err error, now time.Time) (time.Duration, error) {
	if uerr := s.unmade("Next"); uerr != nil {
		return 0, uerr
	}
	if !s.c.observed() {
		d, stop := s.next(err, now)
		if stop != nil {
			s.ended = stop
		}
		return d, stop
	}
	attempt, lw := s.attempts+1, s.limWait
	d, stop := s.next(err, now)
	if stop != nil {
		s.ended = stop
	}
	el := now.Sub(s.start)
	s.c.emitAttempted(Event{Attempt: attempt, Err: err, LimiterWait: lw, Elapsed: el})
	if stop != nil {
		s.c.emitGaveUp(Event{Attempt: attempt, Err: stop, Elapsed: el})
	} else {
		s.c.emitRetried(Event{Attempt: attempt, Err: err, Delay: d, Elapsed: el})
	}
	return d, stop
}

func (s *Schedule) next(err error, now time.Time) (time.Duration, error) {
	s.endAttempt(err)
	s.attempts++
	s.limWait = 0
	s.passed, s.thrott = 0, false
	s.res = nil // a token reserved for the attempt that just failed was used
	if err != nil {
		s.last = err
		if perm := asPermanent(err); perm != nil {
			s.c.record(err, now)
			return 0, perm.Err
		}
		if s.c.transient != nil && !s.c.transient(err) {
			s.c.record(err, now)
			return 0, err
		}
	}
	p := &s.d.p
	if p.MaxAttempts > 0 && s.attempts >= p.MaxAttempts {
		return 0, s.stop(ErrExhausted)
	}
	d := s.d.draw(s.attempts - 1)
	var ra time.Duration
	if err != nil {
		if v, ok := RetryAfterDelay(err); ok && v > d {
			ra = min(v, p.MaxRetryAfter)
			d = max(d, ra)
		}
	}
	if p.MaxElapsed > 0 && now.Add(d).Sub(s.start) > p.MaxElapsed {
		if ra > 0 {
			return 0, s.stop(retryAfterBeyond(ra, p.MaxElapsed))
		}
		return 0, s.stop(ErrExhausted)
	}
	if s.c.budgetAtFailure() && !s.c.budget.TryWithdraw(now) {
		return 0, s.stop(ErrBudgetExhausted)
	}
	return d, nil
}

// retryAfterBeyond is the reason of a stop caused by a Retry-After.
func retryAfterBeyond(ra, maxElapsed time.Duration) error {
	return fmt.Errorf("%w: server asked to retry after %v, beyond MaxElapsed %v", ErrExhausted, ra, maxElapsed)
}

// stop returns the *RetryError ending the loop for reason.
func (s *Schedule) stop(reason error) error {
	return &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}
}

// FirstDelay returns a wait before the first attempt of a run, for loops
// that do not start at once (a subscription whose connection was just lost
// would fail at once): one draw of the policy's first delay, the same
// jitter as a first retry. It does not count an attempt and does not move
// the sequence. Call Admit when it is over, as for a retry, if the first
// attempt must also take a limiter token.
func (s *Schedule) FirstDelay() time.Duration {
	if s.d.p.Jitter == DecorrelatedJitter {
		prev := s.d.prev
		d := s.d.draw(0)
		s.d.prev = prev
		return d
	}
	return s.d.draw(0)
}

// Admit is Decide(now, Ready(RetryAttempt)) in the (delay, stop) form of
// Next: 0 and nil to make the attempt now; a wait (for the limiter token,
// which stays held, or the backoff after a local refusal, Throttled true);
// or the stop that ends the loop. Asked again before the attempt runs, it
// returns the time left on the token already held. The rules are in
// docs/engine.md.
func (s *Schedule) Admit(now time.Time) (time.Duration, error) {
	if err := s.unmade("Admit"); err != nil {
		return 0, err
	}
	if s.ended != nil {
		s.thrott = false // nothing was asked: nothing rejected
		return 0, s.ended
	}
	return s.legacy(s.ready(RetryAttempt, now), now)
}

// Cancel gives back, at now, the limiter token Admit reserved for an
// attempt that will not run (the loop stops, or restarts). It does nothing
// when no token is held.
func (s *Schedule) Cancel(now time.Time) {
	s.endAttempt(context.Canceled) // an admitted attempt that will not be made
	if s.res != nil {
		s.res.CancelAt(now)
		s.res = nil
	}
}

// Wait is the blocking form of a step: it waits d (the delay Next
// returned), then the retry's admission (Ready(RetryAttempt)): a token wait,
// or after a local refusal the next delay and a new ask. It returns nil
// when the attempt may start, or the error that ends the loop: a
// *RetryError whose Reason is ctx.Err(), an error wrapping
// context.DeadlineExceeded when a wait would end after ctx's deadline
// (checked before sleeping), or ErrExhausted. A retry whose delay was
// within MaxElapsed is made even if its timer fires a little after
// MaxElapsed, with gates as without them (Decide's Ready stops a retry
// that comes due after MaxElapsed: a caller's late scheduler). t is the timer to wait on
// (nil: a new time.Timer); a nil ctx is an *ArgumentError.
func (s *Schedule) Wait(ctx context.Context, d time.Duration, t backoff.Timer) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Schedule.Wait", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := s.unmade("Wait"); err != nil {
		return err
	}
	if s.ended != nil {
		return s.ended
	}
	if err := s.wait(ctx, d, t); err != nil {
		return s.gaveUp(err, s.c.now())
	}
	return nil
}

func (s *Schedule) wait(ctx context.Context, d time.Duration, t backoff.Timer) error {
	for {
		if d > 0 {
			if err := s.deadline(ctx, d, "next attempt in %v would start after the context deadline"); err != nil {
				return err
			}
			if err := Wait(ctx, d, t); err != nil {
				return s.stop(err)
			}
		}
		if s.c.limiter == nil && s.c.throttle == nil && s.c.breaker == nil && (s.c.budget == nil || s.c.budgetAtFailure()) {
			return nil
		}
		now := s.c.now()
		dec := s.admission(RetryAttempt, now, false) // the delays it slept were checked against MaxElapsed
		switch dec.Verdict {
		case AttemptNow:
			return nil
		case Stop, Drop:
			s.end(dec)
			return dec.Err
		}
		if dec.Reason != ErrLimited { // refused locally: back off, then ask again
			d = dec.Delay
			continue
		}
		w := dec.Delay
		if err := s.deadline(ctx, w, "retry limiter: next token in %v would come after the context deadline"); err != nil {
			s.Cancel(now)
			return err
		}
		if err := Wait(ctx, w, t); err != nil {
			s.Cancel(s.c.now())
			return s.stop(err)
		}
		// The token is ours: the breaker is asked last, as the attempt starts.
		if s.c.breaker == nil || s.c.gatesOf(RetryAttempt)&GateBreaker == 0 || s.done != nil {
			return nil
		}
		done, err := s.c.breaker.Allow()
		if err == nil {
			s.done = done
			return nil
		}
		dec = s.refused(GateBreaker, &BreakerError{Err: err}, s.c.now())
		if dec.Verdict != WaitFor {
			s.end(dec)
			return dec.Err
		}
		d = dec.Delay
	}
}

// deadline returns a stop error when waiting d would end at or after ctx's
// deadline (compared with the real clock, as the context package does).
func (s *Schedule) deadline(ctx context.Context, d time.Duration, format string) error {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Add(d).Before(dl) {
		return s.stop(fmt.Errorf("%w: "+format, context.DeadlineExceeded, d))
	}
	return nil
}

// Wait waits d, or until ctx is done: the one sleep-with-context of
// rebound (every wait of every loop ends when its context is done). It
// returns nil after d, and ctx.Err() if ctx is done first (or already).
// A d <= 0 does not wait. t is the timer to wait on (a fake one in
// tests); nil means a new time.Timer, stopped before Wait returns. A nil
// ctx is an *ArgumentError (matching ErrInvalidArgument), not a panic.
func Wait(ctx context.Context, d time.Duration, t backoff.Timer) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Wait", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if t == nil {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.Start(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Resume makes s continue a loop that had already reported n failed
// attempts before it was interrupted (a queued call restored from storage
// after a restart): Attempts becomes n and the delay sequence moves on as
// if those n delays had been drawn, so MaxAttempts counts the attempts made
// before the interruption and the next delay is the one after them. It
// consults no budget, throttle or limiter and does nothing if n is not
// more than Attempts. Of a long run it draws only the last resumeDraws
// delays (where the sequence is: a ceiling depends on n alone, a
// decorrelated delay reaches its steady range within them), so that a
// huge n (a damaged record's count) takes no time.
func (s *Schedule) Resume(n int) {
	if n-s.attempts > resumeDraws {
		s.attempts = n - resumeDraws
	}
	for ; s.attempts < n; s.attempts++ {
		s.d.draw(s.attempts)
	}
}

// resumeDraws is how many of the delays before it Resume draws at most.
const resumeDraws = 256
