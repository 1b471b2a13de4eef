package rebound

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// A Schedule is the state of one retry loop. Ask it with Admit; report
// each admitted attempt with Attempt.Done. Make one per loop with
// Retrier.NewSchedule; it is not safe for concurrent use.
//
//	for {
//		a, d := s.Admit(time.Now())
//		if d.Delay == 0 && !d.Stop { // admitted: make the attempt
//			d = a.Done(call(ctx), time.Now())
//		}
//		if d.Stop {
//			return d.Err // nil after a success
//		}
//		if err := wait(ctx, d.Delay); err != nil { // a timer and ctx.Done()
//			s.Cancel(time.Now()) // a token held goes back
//			return err
//		}
//	}
//
// Time is passed in, so a Schedule runs in virtual time too. The rules
// are in docs/engine.md.
type Schedule struct {
	c        *config
	d        drawer
	start    time.Time
	attempts int   // failed attempts of the run, local refusals included
	last     error // the last failure of the run
	res      *rate.Reservation
	limWait  time.Duration
	passed   gate              // the gates the attempt that is due has passed
	lres     *rate.Reservation // the token held for a lookup
	lpassed  gate              // the gates the lookup that is due has passed
	ended    error             // the stop that ended the run, until Reset
	gen      uint32            // the run's outstanding Attempt is the one admitted at this count
	resumed  bool              // the run was restored (Resume): its next attempt is a retry

	done func(error) // the Breaker's report for the admitted attempt
}

// prepare prepares s for a loop starting at now.
func (s *Schedule) prepare(c *config, p Policy, seed uint64, seeded bool, now time.Time) {
	s.c = c
	s.d.seedFrom(p, seed, seeded)
	s.start = now
}

// Reset starts a new run at now. It gives back what Cancel gives back,
// forgets the failures and restarts the delays and MaxElapsed.
func (s *Schedule) Reset(now time.Time) {
	s.cancelLookup(now)
	s.reset(now)
}

func (s *Schedule) reset(now time.Time) {
	s.cancel(now)
	s.attempts = 0
	s.last = nil
	s.limWait = 0
	s.passed = 0
	s.ended = nil
	s.resumed = false
	s.d.reset()
	s.start = now
}

// Cancel gives back, at now, what is held for attempts that will not be
// made: limiter tokens and a breaker admission. The run goes on: the
// budget and the throttle, which give nothing back, are not asked again
// for the attempt due.
func (s *Schedule) Cancel(now time.Time) {
	s.cancel(now)
	s.cancelLookup(now)
	s.passed &= gateBudget | gateThrottle | throttleUnsent
}

// cancel gives back the run's token and breaker admission.
func (s *Schedule) cancel(now time.Time) {
	s.gen++                        // an Attempt admitted before is no longer outstanding
	s.endAttempt(context.Canceled) // an admitted attempt that will not be made
	if s.res != nil {
		s.res.CancelAt(now)
		s.res = nil
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

// elapsed is the time since the start of the run at now, for an Event:
// 0 if the clock stepped back.
func (s *Schedule) elapsed(now time.Time) time.Duration { return max(0, now.Sub(s.start)) }

// firstDelay draws a wait before a run's first attempt. It has the
// jitter of a first retry, and counts nothing.
func (s *Schedule) firstDelay() time.Duration {
	if s.d.p.Jitter == DecorrelatedJitter {
		prev := s.d.prev
		d := s.d.draw(0)
		s.d.prev = prev
		return d
	}
	return s.d.draw(0)
}

// Resume continues a run that failed n times before (a call restored
// after a restart): its next attempt is a retry. The delays move on as
// if drawn; no gate is asked. No delay moves if n is not above the
// failed attempts of the run (Decision.Attempt). With n at or past
// MaxAttempts, the next Admit of the run stops with ErrExhausted.
func (s *Schedule) Resume(n int) {
	s.resumed = true
	// Of a long run only the last resumeDraws delays are drawn, so that
	// a damaged record's huge n takes no time.
	if n-s.attempts > resumeDraws {
		s.attempts = n - resumeDraws
	}
	for ; s.attempts < n; s.attempts++ {
		s.d.draw(s.attempts)
	}
}

// resumeDraws is how many of the delays before it Resume draws at most.
const resumeDraws = 256

// endAttempt reports the end of the admitted attempt to the breaker.
func (s *Schedule) endAttempt(err error) {
	if s.done != nil {
		done := s.done
		s.done = nil
		done(err)
	}
}

// stop returns the *RetryError ending the run for reason.
func (s *Schedule) stop(reason error) error {
	return &RetryError{Attempts: s.attempts, Last: s.last, Reason: reason}
}
