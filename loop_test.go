package rebound_test

import (
	"time"

	"github.com/rebound-go/rebound"
)

// A loop drives a Schedule as a retry loop does: Admit, then the Done of
// the Attempt admitted. Its methods give the answers in the forms the
// tests check: a Decision, or a delay and a stop.
type loop struct {
	*rebound.Schedule
	a     rebound.Attempt  // the attempt admitted last
	look  rebound.Attempt  // the lookup admitted last
	last  rebound.Decision // the last answer of an admission
	lw    time.Duration    // the wait for the token of the attempt due
	asked bool             // the attempt due has been asked for
}

func newLoop(r *rebound.Retrier, now time.Time) *loop {
	return &loop{Schedule: r.NewSchedule(now)}
}

// step is what happened, for decide.
type step struct {
	op   int
	kind rebound.AttemptKind
	err  error
}

const (
	opReady = iota
	opFailed
	opSucceeded
	opAbandoned
	opLookedUp
)

func ready(k rebound.AttemptKind) step { return step{op: opReady, kind: k} }
func failed(err error) step            { return step{op: opFailed, err: err} }
func succeeded() step                  { return step{op: opSucceeded} }
func abandoned() step                  { return step{op: opAbandoned} }
func lookedUp(err error) step          { return step{op: opLookedUp, err: err} }

// decide tells the loop's Schedule what happened at now: an admission
// (Admit), an attempt's end (Done), or an attempt given up (Cancel). A
// failure or success with no attempt admitted yet is of a first attempt
// admitted then.
func (l *loop) decide(now time.Time, st step) rebound.Decision {
	switch st.op {
	case opReady:
		a, d := l.AdmitKind(now, st.kind)
		if d.Verdict() == rebound.AttemptNow {
			if st.kind == rebound.LookupAttempt {
				l.look = a
			} else {
				l.a = a
			}
		}
		if st.kind != rebound.LookupAttempt {
			if !l.asked {
				l.lw = 0
				if d.Verdict() == rebound.WaitFor && d.Reason == nil {
					l.lw = d.Delay
				}
			}
			l.asked = d.Verdict() == rebound.AttemptNow || (d.Verdict() == rebound.WaitFor && d.Reason == nil)
		}
		l.last = d
		return d
	case opFailed, opSucceeded:
		l.asked = false
		l.lw = 0
		l.last = rebound.Decision{}
		return l.attempt(now).Done(st.err, now)
	case opLookedUp:
		return l.look.Done(st.err, now)
	default:
		l.asked = false
		l.Cancel(now)
		return rebound.Decision{Attempt: l.Attempts()}
	}
}

// attempt returns the attempt of the run, admitting a first attempt if
// none was. Once one was, a failure reported without a new admission is
// of the run's outstanding attempt: the gates are not asked again.
func (l *loop) attempt(now time.Time) rebound.Attempt {
	if l.a == (rebound.Attempt{}) {
		l.a, _ = l.AdmitKind(now, rebound.FirstAttempt)
		return l.a
	}
	return rebound.Outstanding(l.Schedule)
}

// next reports a failure with err at now: the delay, or the stop.
func (l *loop) next(err error, now time.Time) (time.Duration, error) {
	return delayOrStop(l.decide(now, failed(err)))
}

// succeeded reports a success at now.
func (l *loop) succeeded(now time.Time) { l.decide(now, succeeded()) }

// admit asks for a retry at now: 0 to make it now, a wait, or the stop.
func (l *loop) admit(now time.Time) (time.Duration, error) {
	return delayOrStop(l.decide(now, ready(rebound.RetryAttempt)))
}

// begin asks for a first attempt at now, as admit does.
func (l *loop) begin(now time.Time) (time.Duration, error) {
	return delayOrStop(l.decide(now, ready(rebound.FirstAttempt)))
}

// throttled reports whether the last admission was refused by a gate.
func (l *loop) throttled() bool {
	return l.last.Reason != nil
}

// limiterWait is the wait the attempt due was given for its token.
func (l *loop) limiterWait() time.Duration { return l.lw }

func delayOrStop(d rebound.Decision) (time.Duration, error) {
	switch d.Verdict() {
	case rebound.WaitFor:
		return d.Delay, nil
	case rebound.Stop:
		return 0, d.Err
	}
	return 0, nil
}
