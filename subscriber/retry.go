package subscriber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// runCtl is the retry control of a subscription: its state in the
// transition table (runtable.go) and what the actions work on. Its methods
// are called with the subscription's mutex held, except attempt.
type runCtl struct {
	st       runState
	parked   bool               // st is parkable and the retry timer waits for Connected (park.go)
	attempts int32              // of the current confirmation
	cancel   context.CancelFunc // of the attempt in flight
	sch      *rebound.Schedule  // of the current confirmation; nil while subscribed
	att      rebound.Attempt    // the attempt sch admitted last
	confDL   time.Time          // deadline of a wait for evidence (rsAwaiting); zero: none
	total    int32
	deferred int32 // attempts deferred locally (throttle, budget)
	deferWhy error // why the last due attempt was deferred; nil once one is sent
}

// stepIn is what comes with an event.
type stepIn struct {
	now     time.Time
	reason  error         // the disruption, the attempt's error, why an attempt was deferred
	delay   time.Duration // evTokenWait, evDeferred: when to ask again
	confirm string        // evConfirmed: the adapter's evidence
}

// stepOut is what a step did, for the caller's logging.
type stepOut struct {
	acked  bool          // the subscription was confirmed (aAck, aAckEvidence)
	failed bool          // a failed attempt was recorded (aFailure)
	delay  time.Duration // aBackoff: the delay before the retry
	gaveUp error         // aBackoff: the Schedule ended the loop (a classifier said not retryable)
}

// step moves the retry control on ev: the table's next state, then its
// actions in bit order.
func (r *runCtl) step(s *Subscription, ev runEvent, in stepIn) (out stepOut) {
	tr := s.m.table[r.st][ev]
	if tr.next != same {
		r.st = tr.next
	}
	now := in.now
	for a := tr.do; a != 0; a &= a - 1 {
		switch a & -a {
		case aResetAttempts:
			r.attempts = 0
		case aRetrying:
			s.setStateLocked(StateRetrying, in.reason)
		case aFailure:
			out.failed = true
			s.lastErr = in.reason
			s.setStateLocked(StateRetrying, in.reason)
		case aCancelAttempt:
			if r.cancel != nil {
				r.cancel() // its connection is gone
			}
		case aCancelConfirm:
			s.cancelTimer(timerConfirm)
		case aCancelRetry:
			s.cancelTimer(timerRetry)
			r.endRun(now, false) // a token held for it given back
		case aNotConfirmed:
			s.m.log.Info("no confirmation from the registry adapter; confirming", zap.Stringer("key", s.key))
			s.lastErr = errNotConfirmed
		case aNewRun:
			r.endRun(now, false) // a token held given back; the next Schedule starts the run
		case aTimerNow:
			s.setTimer(timerRetry, now)
		case aTimerFirst:
			s.setTimer(timerRetry, now.Add(admit.FirstDelay(r.schedule(s.m, now))))
		case aTimerAt:
			if ev == evTokenWait {
				s.setTokenTimer(timerRetry, now.Add(in.delay)) // sent when its token is due, not batched on the grid
			} else {
				s.setTimer(timerRetry, now.Add(in.delay))
			}
		case aBackoff:
			out.delay, out.gaveUp = r.backoff(s, now, in.reason)
		case aDeferred:
			r.deferred++
			r.deferWhy = in.reason
			noteLocked(s, rebound.Event{Kind: rebound.EventThrottled, Err: in.reason, Delay: in.delay},
				SubscriptionEvent{Key: s.key, ID: s.id, At: now})
		case aAwait:
			r.confDL = time.Time{}
			s.cancelTimer(timerConfirm)
		case aAwaitCap:
			r.confDL = now.Add(s.m.opts.confirmCap)
			s.setTimer(timerConfirm, r.confDL)
		case aSucceeded:
			s.closeReadyLocked()
			s.lastErr = nil
			r.endRun(now, true) // the token was used; the next attempt is a new run
		case aAck:
			out.acked = true
			r.ack(s, now, "subscribe", false)
		case aAckEvidence:
			out.acked = true
			r.ack(s, now, in.confirm, true)
		case aLaunch:
			r.launch(s, true)
		case aLaunchNow:
			r.launchFirst(s, now)
		case aStop:
			for k := range numTimers {
				s.cancelTimer(k)
			}
			if r.cancel != nil {
				r.cancel() // ends the attempt in flight
			}
			r.endRun(now, false) // a token reserved for an attempt that will not run
		}
	}
	r.park(s, tr.do&(aTimerNow|aTimerFirst|aTimerAt|aBackoff) != 0)
	return out
}

// backoff sets the retry timer after the Schedule's next delay for the
// failure reason, or returns the error of a Schedule that stops (not
// retryable after all, a classifier: stop like a permanent error).
func (r *runCtl) backoff(s *Subscription, now time.Time, reason error) (time.Duration, error) {
	d := r.att.Done(reason, now)
	if d.Stop {
		return 0, d.Err
	}
	s.setTimer(timerRetry, now.Add(d.Delay))
	return d.Delay, nil
}

// launchFirst starts the Subscribe call's first run: a deposit in the
// budget, no token (admit.go).
func (r *runCtl) launchFirst(s *Subscription, now time.Time) {
	r.sch = s.m.starter.NewSchedule(now)
	r.att, _ = r.sch.Admit(now) // a first attempt: its gates (a deposit) admit every attempt
	r.launch(s, false)
}

// status fills the retry control's part of a Status.
func (r *runCtl) status(st *Status) {
	st.Attempts, st.TotalAttempts = int(r.attempts), int(r.total)
	st.Deferred, st.DeferReason = int(r.deferred), r.deferWhy
	if r.st == rsAwaiting {
		st.ConfirmDeadline = r.confDL
	}
}

// schedule returns the subscription's rebound.Schedule, creating it (a new
// run at now) if needed.
func (r *runCtl) schedule(m *Manager, now time.Time) *rebound.Schedule {
	if r.sch == nil {
		r.sch = m.retrier.NewSchedule(now)
	}
	return r.sch
}

// fire runs when the retry timer is due: the attempt due asks for
// admission, and the answer is the event.
func (r *runCtl) fire(s *Subscription, now time.Time) {
	if _, ok := r.st.due(); !ok {
		return
	}
	if r.park(s, true); r.parked {
		return // the connection went down after the timer was set
	}
	ev, d, why := r.admit(s.m, now)
	r.step(s, ev, stepIn{now: now, reason: why, delay: d})
}

// launch starts an attempt: in a goroutine of its own when queued is false
// (the first attempt, from Subscribe), on the scheduler's runners
// otherwise.
func (r *runCtl) launch(s *Subscription, queued bool) {
	r.deferWhy = nil
	r.attempts++ // shadowcheck:allow the calls sent in this confirmation: Status.Attempts and the id that tells a stale result apart; the engine counts failed attempts, refusals included
	r.total++
	ctx, cancel := context.WithCancel(s.parent)
	r.cancel = cancel
	s.calls.Add(1)
	s.m.wg.Add(1)
	if queued {
		s.m.sched.enqueue(job{r: s, ctx: ctx, n: int(r.attempts)})
		return
	}
	go r.attempt(s, ctx, int(r.attempts))
}

// attempt is one Registry.Subscribe call.
func (r *runCtl) attempt(s *Subscription, ctx context.Context, n int) {
	defer s.m.wg.Done()
	err := ctx.Err() // cancelled while queued: the subscription stopped or reconnected
	unsent := err != nil
	if !unsent {
		err = r.call(s, ctx)
	}
	permanent := err != nil && (errors.Is(err, rebound.ErrClosed) || rebound.IsPermanent(err))

	s.mu.Lock()
	if unsent {
		r.uncountLocked()
	}
	r.cancel()
	r.cancel = nil
	now := time.Now()
	out, err := r.settleLocked(s, ctx, err, unsent, permanent, now)
	if out.gaveUp != nil {
		permanent, err = true, out.gaveUp
	}
	stopped := s.stopped
	end := attemptEnd(stopped || out.acked, permanent, out, n, err)
	// An attempt not sent is no Registry.Subscribe call: no attempt
	// event (the observers' attempts are the calls, TotalAttempts).
	quiet := stopped || unsent && !permanent
	if !quiet && s.m.observed() {
		noteAttemptLocked(s, rebound.Event{Kind: rebound.EventAttempt, Attempt: n, Err: err, Delay: out.delay},
			SubscriptionEvent{Key: s.key, ID: s.id, At: now}, end)
	}
	lg := s.loopLocked()
	s.unlock()
	s.calls.Done()

	if quiet {
		return
	}
	lg.Observe(rebound.Event{Kind: rebound.EventAttempt, Attempt: n, Err: err}) // a success: "recovered" if it was failing
	if end.Kind != 0 {
		lg.Observe(end)
	}
	if permanent && s.stop(err) {
		s.finish()
	}
}

// uncountLocked takes back the counts of an attempt that made no
// Registry.Subscribe call: the counts are of calls (Status.Attempts,
// TotalAttempts). No other attempt was launched meanwhile (the next waits
// for this one's result), so Attempts counts this one unless a disruption
// started a new confirmation from 0 since.
func (r *runCtl) uncountLocked() {
	if r.attempts > 0 {
		r.attempts-- // shadowcheck:allow the count of calls sent (Status.Attempts): this one was not
	}
	r.total--
}

// settleLocked steps the subscription's state machine with an attempt's
// result err and returns the step's outcome and the error to report (nil
// when the failure is not the registry's to report).
func (r *runCtl) settleLocked(s *Subscription, ctx context.Context, err error, unsent, permanent bool, now time.Time) (stepOut, error) {
	var out stepOut
	switch {
	case s.stopped:
		err = nil // not worth a log line: the subscription is stopping
	case unsent && s.parent.Err() != nil:
		// Its context ended while the attempt was queued: the
		// subscription is stopping (onCtxDone; evStop ends the attempt in
		// flight). No call was made: no failure, no retry, no event.
		err = nil
	case err == nil:
		out = r.step(s, evSucceeded, stepIn{now: now})
	case permanent:
		s.lastErr = err
	case s.parent.Err() != nil:
		// Its context ended during the call (onCtxDone stops it): the
		// call was made, but its failure is the stop's, not the
		// registry's: no retry, no retrying state.
	case ctx.Err() != nil:
		// Cancelled by a reconnect (the only other canceller is stop).
		out = r.step(s, evAborted, stepIn{now: now, reason: err})
	default:
		out = r.step(s, evFailed, stepIn{now: now, reason: err})
	}
	return out, err
}

// attemptEnd is the attempt's closing event: EventGiveUp for a permanent
// failure, EventRetry for one retried, none (Kind 0) when silent (the
// subscription stopped, or the attempt was acknowledged).
func attemptEnd(silent, permanent bool, out stepOut, n int, err error) rebound.Event {
	switch {
	case silent:
		return rebound.Event{}
	case permanent:
		return rebound.Event{Kind: rebound.EventGiveUp, Attempt: n, Err: err}
	case out.failed:
		return rebound.Event{Kind: rebound.EventRetry, Attempt: n, Err: err, Delay: out.delay}
	}
	return rebound.Event{}
}

// noteAttemptLocked gives the attempt e (with Detail d), and its closing event end (if
// any), to the subscription's retry log and the Manager's observers.
func noteAttemptLocked(s *Subscription, e rebound.Event, d SubscriptionEvent, end rebound.Event) {
	noteLocked(s, e, d)
	if end.Kind != 0 {
		end.Detail = d
		s.out.evs = append(s.out.evs, end)
	}
}

func (r *runCtl) call(s *Subscription, ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("subscriber: Registry.Subscribe(%s) panicked: %v", s.key, p)
		}
	}()
	return s.m.reg.Subscribe(ctx, s.key, &s.sink)
}

// ack records a confirmation: the subscription is subscribed. reason is
// "subscribe" for an acknowledged Registry.Subscribe (evidence false), or
// the adapter's words for its Sink.Confirmed (evidence true).
func (r *runCtl) ack(s *Subscription, now time.Time, reason string, evidence bool) {
	// Used, not given back: a token held was used by the attempt that
	// succeeded (an answered request for the throttle). A new run starts
	// with the next disruption. Evidence ends a run that made no attempt.
	r.endRun(now, true)
	s.m.upSeen.Store(true) // the registry answered: a later Disconnected parks (park.go)
	s.lastErr = nil
	s.closeReadyLocked()
	s.hold.confirmedAt(now, s.m.opts.hold)
	s.setStateLocked(s.settledLocked(), nil)
	if reason != "" {
		noteLocked(s, rebound.Event{Kind: rebound.EventConfirmed},
			SubscriptionEvent{Key: s.key, ID: s.id, Reason: reason, At: now, evidence: evidence})
	}
	s.look.schedule(s, now)
	if s.dq.hasLatest {
		s.dq.kick(s)
	}
}
