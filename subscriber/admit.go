package subscriber

import (
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// The subscriptions' admission is decided by the engine
// (rebound.Schedule.Admit), with these settings:
//
//   - the Subscribe call's first attempt passes the budget only (a
//     deposit): the limiter paces retries and re-confirmations, not new
//     subscriptions, and the throttle never holds back a first attempt
//     (see WithThrottle);
//   - the first attempt of every later run (a disruption, a Refresh, a
//     missing confirmation) deposits in the budget and takes a limiter
//     token;
//   - a retry after a failure withdraws from the budget, asks the
//     throttle and takes a token (the engine's default);
//   - a refusal by the budget or the throttle defers the retry to the next
//     backoff step (admit.Defer; a subscription never gives up: its policy
//     has no MaxAttempts);
//   - a Lookup takes a limiter token (the engine's default).
//
// A subscription's first run uses schedules of the Manager's starter
// Retrier, whose first attempts take no token; every later run one of its
// retrier. Both share the limiter, the budget and the throttle.
func (o *options) retriers() (retrier, starter *rebound.Retrier, err error) {
	var ropts []rebound.Option
	if o.limiter != nil {
		ropts = append(ropts, rebound.WithLimiter(o.limiter))
	}
	if o.budget != nil {
		ropts = append(ropts, rebound.WithBudget(o.budget))
	}
	if o.throttle != nil {
		ropts = append(ropts, rebound.WithThrottle(o.throttle))
	}
	ropts = append(ropts, o.ropts...) // after the default limiter: WithPolicy's own wins
	// WithPolicy's observers and meter are the Manager's (observe): the
	// Schedules emit no events of theirs.
	ropts = append(ropts, admit.Unobserved().(rebound.Option))
	ropts = append(ropts, rebound.WithMaxAttempts(0), rebound.WithMaxElapsed(0)) // never stop
	// The Manager's own rules come last: no option of WithPolicy changes them.
	ropts = append(ropts, admit.Refuse(admit.Budget, admit.Defer).(rebound.Option), o.retryMetrics())
	retrier, err = rebound.NewRetrier(o.policy, append(ropts, admit.First(admit.Budget|admit.Limiter).(rebound.Option))...)
	if err != nil {
		return nil, nil, &rebound.ArgumentError{Func: "subscriber.WithPolicy", Arg: "opts", Reason: "holds a bad option", Err: err}
	}
	starter, err = rebound.NewRetrier(o.policy, append(ropts, admit.First(admit.Budget).(rebound.Option))...)
	return retrier, starter, err
}

// admission is what the attempt due at the retry timer is.
type admission uint8

const (
	admitFirst  admission = iota + 1 // the first attempt of a run
	admitRetry                       // a retry after a failure
	admitQueued                      // an admitted attempt waiting for its token: the time left on it
)

// admit asks the engine for the attempt due at now: a first attempt of a
// new run, or a retry once the run failed (the Schedule knows). It returns
// the event: evAdmitted (send it now), evTokenWait (a limiter token is
// held for it, due after the duration returned) or evDeferred (refused
// locally, with the reason: deferred to the next backoff step, or a first
// delay for a limiter that can never grant a token).
func (r *runCtl) admit(m *Manager, now time.Time) (runEvent, time.Duration, error) {
	a, d := r.schedule(m, now).Admit(now)
	switch {
	case d.Stop:
		// No MaxElapsed (WithPolicy) and the refusals defer: only a
		// limiter that can never grant a token (its burst set to 0 after
		// New) ends the run. Nothing may be sent past it, and a
		// subscription never ends on a local refusal: the run is over,
		// and a new one asks again after a first delay.
		r.endRun(now, false)
		return evDeferred, admit.FirstDelay(r.schedule(m, now)), d.Err
	case d.Delay == 0:
		r.att = a
		return evAdmitted, 0, nil
	case d.Reason == nil:
		return evTokenWait, d.Delay, nil
	default:
		return evDeferred, d.Delay, d.Reason
	}
}

// endRun ends the current run, if there is one: the next starts with a
// new Schedule. The engine hears that the run's last attempt succeeded,
// or gets back what is held for attempts that will not be made.
func (r *runCtl) endRun(now time.Time, succeeded bool) {
	if r.sch == nil {
		return
	}
	if succeeded && r.att != (rebound.Attempt{}) {
		r.att.Done(nil, now)
	} else {
		r.sch.Cancel(now)
	}
	r.sch, r.att = nil, rebound.Attempt{}
}
