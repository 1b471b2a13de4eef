package subscriber

import (
	"time"

	"github.com/rebound-go/rebound"
)

// admission is what the attempt due at the retry timer asks for.
type admission uint8

const (
	admitFirst  admission = iota + 1 // the first attempt of a run: a budget deposit, then a limiter token
	admitRetry                       // a retry after a failure: the budget, the throttle, then a token
	admitQueued                      // an admitted attempt waiting for its token: the time left on it
)

// gate is the admission state of the attempt due: the budget (WithBudget)
// and the throttle (WithThrottle) are asked once each per retry.
type gate struct {
	withdrawn bool // the budget allowed the retry already
	allowed   bool // the throttle allowed it already
}

// admit asks for the attempt of kind k due at now. It returns the event:
// evAdmitted (send it now), evTokenWait (a limiter token is held for it,
// due after the duration returned) or evDeferred (refused locally, with
// the reason: the retry is deferred to the next backoff step, see
// rebound.Schedule.Refuse; a subscription never gives up: its policy has
// no MaxAttempts, so Refuse never stops).
func (r *runCtl) admit(m *Manager, k admission, now time.Time) (runEvent, time.Duration, error) {
	switch k {
	case admitRetry:
		var why error
		switch b, t := m.opts.budget, m.opts.throttle; {
		case b != nil && !r.gate.withdrawn && !b.TryWithdraw(now):
			why = rebound.ErrBudgetExhausted
		case t != nil && !r.gate.allowed && !t.Allow(now):
			r.gate.withdrawn = b != nil // not charged again for this retry
			why = rebound.ErrThrottled
		default:
			r.gate.withdrawn, r.gate.allowed = b != nil, t != nil
		}
		if why != nil {
			d, _ := r.schedule(m, now).Refuse(why, now)
			return evDeferred, d, why
		}
	case admitFirst:
		r.gate.deposit(m, now)
	}
	if m.opts.limiter != nil {
		// The token is taken when the attempt is due, not when it was
		// scheduled (in time order, see rebound.Schedule.Admit); Admit
		// called again returns the time left on the token it holds.
		if w, _ := r.schedule(m, now).Admit(now); w > 0 {
			return evTokenWait, w, nil
		}
	}
	return evAdmitted, 0, nil
}

// deposit records a first attempt of a confirmation in the budget
// (WithBudget).
func (g *gate) deposit(m *Manager, now time.Time) {
	if b := m.opts.budget; b != nil {
		b.Deposit(now)
	}
}

// accepted records an answered request for the throttle (WithThrottle).
func (g *gate) accepted(m *Manager, now time.Time) {
	if t := m.opts.throttle; t != nil {
		t.Accepted(now)
	}
}
