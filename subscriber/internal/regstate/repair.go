package regstate

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/subscriber"
)

// Repair is the state machine of a registration's repairs, the same for
// every adapter: a run of attempts paced by a rebound.Schedule (Admit,
// the adapter's work, Done), whose waits are a Timer of a Sched, or the
// connection's return while it is down (no timer then). Its methods run
// in the steps of the registration's Loop, one at a time. The zero Repair
// is not usable: Init it. It is held by value in a registration.
//
// A Repair is idle (no run: its Timer is the adapter's), due (Begin's
// grace or a wait is over, or the adapter has work now: Due), or waiting
// (for its Timer, or for Up). Due admits the attempt, or waits (a limiter
// token, a local refusal), or stops (Pause: waits a first delay). The
// attempt succeeds (registered; idle), or fails: repairing, then waiting
// for the backoff, or stopped (Final; the Schedule's stop). Down makes
// the run wait for Up; Up makes it due, from the start of the policy.
type Repair struct {
	timer Timer             // the wait for the run's next attempt; the adapter's own while no run
	s     *rebound.Schedule // the current run; nil when none
	// waiting: the run's next attempt waits, for the timer, or for Up
	// while the connection is down.
	waiting bool
}

// Work is an adapter's part of a Repair: its requests and its rules.
type Work interface {
	Tracker() *Tracker
	// Logger returns the registration's logger for a line at lvl, or nil
	// when lvl is not logged (a logger with fields may be made per line).
	Logger(lvl zapcore.Level) *zap.Logger
	Retrier() *rebound.Retrier // the Schedule of each run is drawn from it
	// Attempt makes the admitted attempt at the work due (recording its
	// requests); nil: nothing is left to do.
	Attempt() error
	// Up reports whether the registry's connection is up: a failed
	// attempt waits for Up instead of a timer while it is not.
	Up() bool
	// Final reports whether err ends the registration at once: the run
	// ends without an outcome (what its attempt holds goes back).
	Final(err error) bool
	// Stopping reports whether the registration is being stopped: a run
	// that ends then is not reported as stopped.
	Stopping() bool
	// Pause reports whether a stop at admission (a limiter that can never
	// grant a token) pauses the run, which asks again after a first delay,
	// instead of ending the registration.
	Pause() bool
}

// Init makes r's Timer one of s that calls fire when due: fire hands a
// step to the registration's Loop, which calls Fired.
func (r *Repair) Init(s *Sched, fire func(gen uint32)) { s.InitTimer(&r.timer, fire) }

// Running reports whether a run is under way.
func (r *Repair) Running() bool { return r.s != nil }

// Waiting reports whether the run's next attempt waits (for the timer,
// or for Up): it is not due now.
func (r *Repair) Waiting() bool { return r.waiting }

// Fired reports whether the Timer's call with gen is live; the wait it
// ended is over.
func (r *Repair) Fired(gen uint32) bool {
	if !r.timer.Live(gen) {
		return false
	}
	r.waiting = false
	return true
}

// Idle arms the Timer for the adapter's own use while no run is under
// way (a periodic check), after d; 0 disarms it.
func (r *Repair) Idle(d time.Duration) {
	if d > 0 {
		r.timer.Reset(d) // in place if armed: one change to the heap
		return
	}
	r.timer.Stop()
}

// Begin starts a run (again, from the start of the policy, if one is
// under way) whose first attempt is due after d: a grace, not a backoff.
func (r *Repair) Begin(rt *rebound.Retrier, d time.Duration) {
	r.restart(rt)
	r.waiting = true
	r.timer.Reset(max(d, time.Nanosecond))
}

func (r *Repair) restart(rt *rebound.Retrier) {
	now := time.Now()
	if r.s != nil {
		r.s.Reset(now) // gives back what a waiting attempt holds
		return
	}
	r.s = rt.NewSchedule(now)
}

// Down tells r that the connection is down: the run's next attempt, if
// any, waits for Up, not for the Timer. With no run, the Timer is the
// adapter's and stays armed: an outage then costs no change to the
// Sched's heap, and the adapter drops a call that comes while down.
func (r *Repair) Down() {
	r.waiting = r.s != nil
	if r.waiting {
		r.timer.Stop()
	}
}

// Up tells r that the connection is up again and reports whether a run
// waits for it: the run then starts again from the start of the policy,
// and its next attempt is due now (the caller makes it: Due).
func (r *Repair) Up() bool {
	if !r.waiting {
		return false
	}
	r.timer.Stop()
	r.waiting = false
	if r.s != nil {
		r.s.Reset(time.Now())
	}
	return true
}

// End ends r with its registration's Loop, or a run whose work the
// adapter found done otherwise: the Timer stops, and a run that ends
// without an outcome gives back what its attempt holds. A later Due or
// Begin starts a new run.
func (r *Repair) End() {
	r.timer.Stop()
	r.waiting = false
	if r.s != nil {
		r.s.Cancel(time.Now())
		r.s = nil
	}
}

// Due makes the run's next attempt, starting a run if none is under way,
// as its Schedule decides: it admits it (w's Attempt), or says how long
// to wait, or stops. It reports false when the registration stops for
// good (w's Tracker is then stopped, unless w is Stopping).
func (r *Repair) Due(w Work) bool {
	now := time.Now()
	if r.s == nil {
		r.s = w.Retrier().NewSchedule(now)
	}
	a, dec := r.s.Admit(now)
	w.Tracker().SetAttempts(dec.Attempt) // a local refusal counts
	switch {
	case dec.Stop && w.Pause():
		// Nothing is sent until the limiter grants: the retry asks again
		// after a first delay.
		if l := w.Logger(zap.DebugLevel); l != nil {
			l.Debug("registration repair paused", zap.Error(dec.Err))
		}
		r.s.Reset(now)
		r.s.Resume(0) // the next attempt is a retry
		r.waiting = true
		r.timer.Reset(max(admit.FirstDelay(r.s), time.Nanosecond))
		return true
	case dec.Stop:
		r.s = nil // ended by its own verdict: nothing to give back
		return r.stop(w, dec.Err)
	case dec.Delay > 0:
		return r.wait(w, dec.Delay)
	}
	return r.outcome(w, a, w.Attempt())
}

// outcome tells the Schedule how the attempt a went and waits for the
// next one if it failed; false: stop for good.
func (r *Repair) outcome(w Work, a rebound.Attempt, err error) bool {
	t := w.Tracker()
	now := time.Now()
	if err == nil {
		a.Done(nil, now)
		r.s = nil
		t.Set(subscriber.RegistrationRegistered, nil)
		return true
	}
	if w.Final(err) {
		// The admitted attempt's token and breaker admission go back:
		// the run ends without its outcome.
		r.s.Cancel(now)
		r.s = nil
		return r.stop(w, err)
	}
	t.Set(subscriber.RegistrationRepairing, err)
	dec := a.Done(err, now)
	t.SetAttempts(dec.Attempt)
	if dec.Stop {
		r.s = nil
		return r.stop(w, dec.Err)
	}
	if l := w.Logger(zap.DebugLevel); l != nil {
		l.Debug("registration repair failed", zap.Int("attempt", dec.Attempt), zap.Duration("next", dec.Delay), zap.Error(err))
	}
	return r.wait(w, dec.Delay)
}

// wait waits d for the next attempt, or for Up while the connection is
// down (an outage costs no timer).
func (r *Repair) wait(w Work, d time.Duration) bool {
	r.waiting = true
	if w.Up() {
		r.timer.Reset(d)
	}
	return true
}

// stop reports the registration stopped for good with err, unless it is
// being stopped; it returns false.
func (r *Repair) stop(w Work, err error) bool {
	if !w.Stopping() {
		// Nothing more can be done; Shutdown and Close still work.
		if l := w.Logger(zap.ErrorLevel); l != nil {
			l.Error("registration stopped", zap.Error(err))
		}
		w.Tracker().Set(subscriber.RegistrationStopped, err)
	}
	return false
}
