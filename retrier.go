package rebound

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// A Retrier is a Policy and a set of options compiled and validated once:
// the prebuilt form of Retry for hot paths and the factory of Schedules for
// loops that run themselves. Do costs no allocation when the first attempt
// succeeds, observers included.
//
// A Retrier is safe for concurrent use by any number of goroutines; it
// holds no per-loop state (each Do, each Schedule has its own).
type Retrier struct {
	c     config
	p     Policy // normalized
	seq   atomic.Uint64
	start bool // the first attempt needs the time (MaxElapsed, budget, throttle)
}

// NewRetrier validates p and opts and compiles them. It returns an
// *ArgumentError (matching ErrInvalidArgument) naming the bad option and
// its rule, or naming p and each bad field of p, its value and its rule
// (matching ErrInvalidArgument).
func NewRetrier(p Policy, opts ...Option) (*Retrier, error) {
	r := &Retrier{}
	if err := r.compile("rebound.NewRetrier", p, opts); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Retrier) compile(fn string, p Policy, opts []Option) error {
	if err := p.validate(); err != nil {
		return &ArgumentError{Func: fn, Arg: "p", Reason: "breaks a Policy rule", Err: err}
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&r.c)
		}
	}
	switch len(r.c.errs) {
	case 0:
	case 1:
		return r.c.errs[0]
	default:
		return joinArgErrors(r.c.errs)
	}
	r.c.compileObservers()
	r.p = p.normalized()
	r.start = r.c.maxElapsed > 0 || r.c.budget != nil || r.c.throttle != nil || (r.c.limiter != nil && r.c.gatesOf(kindFirst)&gateLimiter != 0)
	return nil
}

// NewSchedule returns a new Schedule for one loop whose first run starts at
// now (see Schedule). Each Schedule has its own random source.
func (r *Retrier) NewSchedule(now time.Time) *Schedule {
	s := &Schedule{}
	r.initSchedule(s, now)
	return s
}

func (r *Retrier) initSchedule(s *Schedule, now time.Time) {
	k := r.seq.Add(1) - 1
	s.prepare(&r.c, r.p, r.c.seed+k*0x9e3779b97f4a7c15, r.c.seeded, now)
}

// beginFirst counts, at now, a first attempt made without Do or a Schedule
// (failback's Invoke, through admit.Begin). It deposits in the budget and
// asks the throttle; a rejection is a *RetryError with Reason ErrThrottled.
// recordFirst reports the outcome.
func (r *Retrier) beginFirst(now time.Time) error {
	if !r.c.begin(now) {
		return &RetryError{Reason: ErrThrottled} // "not attempted: ...throttled..."
	}
	return nil
}

// recordFirst reports the outcome of an attempt begun with beginFirst to the throttle.
// Nil or an error that is not transient is an accept.
func (r *Retrier) recordFirst(err error, now time.Time) { r.c.record(err, now) }

// Do calls op until it succeeds, returns a Permanent error, the policy (or budget) allows no further attempt, or ctx is done,
// exactly as Retry does (see Retry for what it returns), with r's policy
// and options. ctx must not be nil; an already-done ctx returns at once
// without calling op.
func (r *Retrier) Do(ctx context.Context, op func(ctx context.Context) error) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Retrier.Do", Arg: "ctx", Reason: "must not be nil"}
	}
	if op == nil {
		return &ArgumentError{Func: "rebound.Retrier.Do", Arg: "op", Reason: "must not be nil"}
	}
	return r.do(ctx, op)
}

func (r *Retrier) run(ctx context.Context, op func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return &RetryError{Reason: err}
	}
	var start time.Time
	var done func(error)
	var res *rate.Reservation // the first attempt's token (withAdmission)
	var lw time.Duration      // and the wait for it
	if r.start {
		start = r.c.now()
		if !r.c.begin(start) { // rejected locally: op not called
			return r.refusedFirst(ctx, op, start, gateThrottle, ErrThrottled)
		}
		var err error
		if res, lw, err = r.firstToken(ctx, start); err != nil {
			if r.c.observed() {
				r.c.emitGaveUp(Event{Err: err, Waiting: true, Elapsed: max(0, r.c.now().Sub(start))})
			}
			return err
		}
	}
	if b := r.c.breaker; b != nil && r.c.gatesOf(kindFirst)&gateBreaker != 0 {
		var berr error
		if done, berr = b.Allow(); berr != nil {
			if !r.start {
				start = r.c.now()
			}
			if res != nil { // the attempt is not made: its token is given back
				res.CancelAt(r.c.now())
			}
			return r.refusedFirst(ctx, op, start, gateBreaker, &breakerError{Err: berr})
		}
	}
	var err error
	if done != nil {
		err = attemptDone(ctx, op, done)
	} else {
		err = op(ctx)
	}
	if err == nil {
		if r.c.throttle != nil {
			r.c.record(nil, start) // a failure is recorded by the Schedule's Next
		}
		// No clock read on the success path (time.Now costs more than
		// the rest of it): Elapsed is 0 for a first attempt.
		for _, f := range r.c.fan[EventAttempt] {
			f(Event{Kind: EventAttempt, Attempt: 1, LimiterWait: lw})
		}
		return nil
	}
	if !r.start {
		start = r.c.now()
	}
	return r.loop(ctx, op, start, lw, err, nil)
}

// refusedFirst handles a first attempt refused by gate g at start: the
// retries follow under refuseDefer; under refuseStop or refuseDrop the
// call ends (a blocking call has no queue to drop from).
func (r *Retrier) refusedFirst(ctx context.Context, op func(context.Context) error, start time.Time, g gate, reason error) error {
	if r.c.refusalOf(g) == refuseDefer {
		return r.loop(ctx, op, start, 0, nil, reason)
	}
	err := &RetryError{Reason: reason}
	if r.c.observed() { // a local rejection (Delay 0: GaveUp follows)
		r.c.emitThrottled(Event{Err: reason})
		r.c.emitGaveUp(Event{Err: err, Waiting: true})
	}
	return err
}

// firstToken waits for a limiter token before the first attempt, due at
// now, when withAdmission puts first attempts behind the limiter, and
// returns it (nil without) and the wait for it. As for a retry
// (Schedule.Admit), a token that would come after MaxElapsed or after
// ctx's deadline, or never, ends the call at once, and a token not used
// is given back.
func (r *Retrier) firstToken(ctx context.Context, now time.Time) (*rate.Reservation, time.Duration, error) {
	lim := r.c.limiter
	if lim == nil || r.c.gatesOf(kindFirst)&gateLimiter == 0 {
		return nil, 0, nil
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() { // the limiter's burst was set to 0 after WithLimiter checked it
		return nil, 0, &RetryError{Reason: fmt.Errorf("%w: retry limiter can never grant a token", ErrExhausted)}
	}
	w := res.DelayFrom(now)
	if w <= 0 {
		return res, 0, nil
	}
	if me := r.c.maxElapsed; me > 0 && w > me {
		res.CancelAt(now)
		return nil, 0, &RetryError{Reason: fmt.Errorf("%w: the retry limiter's next token comes %v after MaxElapsed %v", ErrExhausted, w-me, me)}
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Add(w).Before(dl) {
		res.CancelAt(now)
		return nil, 0, &RetryError{Reason: fmt.Errorf("%w: retry limiter: next token in %v would come after the context deadline", context.DeadlineExceeded, w)}
	}
	var t timer
	if r.c.newTimer != nil {
		t = r.c.newTimer()
	}
	if err := sleep(ctx, w, t); err != nil {
		res.CancelAt(r.c.now())
		return nil, 0, &RetryError{Reason: err}
	}
	return res, w, nil
}

// loop runs the retries after a failed first attempt (lw its wait for a
// limiter token), or after a first attempt refused locally by the throttle
// or the breaker (refused is ErrThrottled or an error matching ErrBreakerOpen; err is nil
// then).
func (r *Retrier) loop(ctx context.Context, op func(context.Context) error, start time.Time, lw time.Duration, err, refused error) error {
	c := &r.c
	var s Schedule
	r.initSchedule(&s, start)
	s.limWait = lw // the first attempt's wait for its token (withAdmission)
	var tm timer
	if c.newTimer != nil {
		tm = c.newTimer()
	}
	for {
		now := c.now()
		var d time.Duration
		var stop error
		waiting := false
		if refused != nil { // the first attempt was not sent: no attempt ended
			reason := refused
			refused, waiting = nil, true
			if d, stop = s.refuse(reason, now); stop == nil {
				stop = s.deadline(ctx, d, "next attempt in %v would start after the context deadline")
			}
		} else {
			attempt := s.attempts + 1
			if c.observed() {
				c.emitAttempted(Event{Attempt: attempt, Err: err, LimiterWait: s.limWait, Elapsed: max(0, now.Sub(start))})
			}
			if cerr := ctx.Err(); cerr != nil {
				s.attempts++
				s.last = err
				stop = s.stop(cerr)
			}
			if stop == nil {
				d, stop = s.next(err, now)
			}
			if stop == nil {
				stop = s.deadline(ctx, d, "next attempt in %v would start after the context deadline")
			}
			if stop == nil && c.observed() {
				c.emitRetried(Event{Attempt: attempt, Err: err, Delay: d, Elapsed: max(0, now.Sub(start))})
			}
		}
		if stop == nil {
			stop = s.wait(ctx, d, tm)
			waiting = stop != nil // the attempt was reported as a retry (or throttled)
		}
		if stop != nil {
			s.cancel(c.now())
			if c.observed() {
				c.emitGaveUp(Event{Attempt: s.attempts, Err: stop, Waiting: waiting, Elapsed: max(0, c.now().Sub(start))})
			}
			return stop
		}
		if s.done != nil {
			done := s.done
			s.done = nil
			err = attemptDone(ctx, op, done)
		} else {
			err = op(ctx)
		}
		if err == nil {
			s.res = nil
			if c.throttle != nil {
				c.record(nil, c.now())
			}
			if c.observed() {
				e := Event{Attempt: s.attempts + 1, LimiterWait: s.limWait, Elapsed: max(0, c.now().Sub(start))}
				c.emitAttempted(e)
				c.emitRecovered(e)
			}
			return nil
		}
	}
}

// errAttemptPanicked is what a Breaker's done receives for an attempt that
// panicked, as gobreaker's own Execute counts a panic.
var errAttemptPanicked = errors.New("rebound: the attempt panicked")

// attemptDone makes the attempt op and reports its end to done, also when
// op panics or exits its goroutine (done gets errAttemptPanicked; the
// panic goes on): an end never reported would keep a half-open breaker's
// probe counted for good, refusing every loop that shares it.
func attemptDone(ctx context.Context, op func(context.Context) error, done func(error)) error {
	ended := false
	defer func() {
		if !ended {
			done(errAttemptPanicked)
		}
	}()
	err := op(ctx)
	ended = true
	done(err)
	return err
}

// wait is the blocking form of a retry's step (Retrier.Do): it waits d,
// then the retry's admission: a token wait, or after a local refusal the
// next delay and a new ask. It returns nil when the attempt may start, or
// the error that ends the loop. A retry whose delay was within MaxElapsed
// is made even if its timer fires a little after MaxElapsed.
func (s *Schedule) wait(ctx context.Context, d time.Duration, t timer) error {
	for {
		if d > 0 {
			if err := s.deadline(ctx, d, "next attempt in %v would start after the context deadline"); err != nil {
				return err
			}
			if err := sleep(ctx, d, t); err != nil {
				return s.stop(err)
			}
		}
		if s.c.limiter == nil && s.c.throttle == nil && s.c.breaker == nil && (s.c.budget == nil || s.c.budgetAtFailure()) {
			return nil
		}
		now := s.c.now()
		dec := s.admission(kindRetry, now, false) // the delays it slept were checked against MaxElapsed
		switch {
		case dec.Stop:
			s.end(dec)
			return dec.Err
		case dec.Delay == 0:
			return nil
		}
		if dec.Reason != nil { // refused locally: back off, then ask again
			d = dec.Delay
			continue
		}
		w := dec.Delay
		if err := s.deadline(ctx, w, "retry limiter: next token in %v would come after the context deadline"); err != nil {
			s.cancel(now)
			return err
		}
		if err := sleep(ctx, w, t); err != nil {
			s.cancel(s.c.now())
			return s.stop(err)
		}
		// The token is ours: the breaker is asked last, as the attempt starts.
		if s.c.breaker == nil || s.c.gatesOf(kindRetry)&gateBreaker == 0 || s.done != nil {
			s.send(&s.passed, s.c.now())
			return nil
		}
		done, err := s.c.breaker.Allow()
		if err == nil {
			s.done = done
			s.send(&s.passed, s.c.now())
			return nil
		}
		dec = s.refused(gateBreaker, &breakerError{Err: err}, s.c.now())
		if dec.Stop {
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

// sleep waits d, or until ctx is done: the one sleep of rebound. It
// returns nil after d, and ctx.Err() if ctx is done first (or already).
// A d <= 0 does not wait. t is the timer to wait on (nil: a time.Timer).
func sleep(ctx context.Context, d time.Duration, t timer) error {
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

// do runs the loop, each attempt in a span when the loop is traced.
func (r *Retrier) do(ctx context.Context, op func(ctx context.Context) error) error {
	if r.c.tracer == nil {
		return r.run(ctx, op)
	}
	a := &tracedRun{tr: r.c.tracer.tr, c: &r.c, op: op}
	defer func() {
		if a.span != nil { // the last attempt failed: the loop stopped, or a hook panicked
			a.close("stop")
		}
	}()
	return r.run(ctx, a.attempt)
}
