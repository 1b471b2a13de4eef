package subscriber

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// While the ConnectionMonitor's last report is Disconnected, and the
// connection was up before (a Connected report, or a confirmation: an
// acknowledged Subscribe or the adapter's evidence), a subscription whose next attempt waits for the retry timer (a run
// scheduled after a disruption, or a retry after a failure) does not keep
// the timer: it is parked, and waits for the one Connected report that
// every subscription gets (evReconnected: a new run at once, through the
// limiter, as for any other reconnect). A down registry then costs the
// Manager nothing per subscription: no wake-up, no attempt that could only
// fail. An attempt already admitted (waiting for its limiter token or in
// flight) is not parked; its failure parks the retry. The first attempt
// of a new subscription is sent at once, down or not.
//
// A registry down since the Manager started does not park: until the
// connection has been seen up, nothing shows that the monitor's view is
// the one Subscribe meets (a health probe on another path, a client still
// connecting, an address never reachable), and the retries keep the
// contract of subscribertest's DownAtStart: a subscription made against a
// down registry retries on its backoff until the registry answers.
//
// Evidence, the empty-list hold and the confirmation cap have timers of
// their own and are not parked. If the monitor returns (or panics), the
// parked subscriptions take their timers back (unpark) or, when it
// returned a closed error (rebound.ErrClosed), stop (registryClosed).

// parkable reports whether the state waits for the retry timer for an
// attempt not admitted yet.
func (s runState) parkable() bool { return s == rsScheduled || s == rsBackoff }

// park runs after every step, with set true if the step set the retry
// timer: it cancels the retry timer of a parkable state while the
// connection is down, and gives a parked one its timer back, due now,
// once it is not (the monitor stopped: no Connected report will come).
// The caller holds s.mu.
func (r *runCtl) park(s *Subscription, set bool) {
	switch {
	case !r.st.parkable():
		r.parked = false
	case s.m.parking.Load():
		r.parked = true
		s.cancelTimer(timerRetry)
	case r.parked:
		r.parked = false
		if !set {
			s.setTimer(timerRetry, time.Now()) // its attempt asks the limiter as usual
		}
	}
}

// unpark gives a parked subscription its retry timer back once the
// connection is no longer known to be down (see park).
func (s *Subscription) unpark() {
	s.mu.Lock()
	defer s.unlock()
	if !s.stopped {
		s.run.park(s, false)
	}
}

// monitor runs the ConnectionMonitor until it returns, then unparks the
// subscriptions (or stops them, for a closed registry).
func (m *Manager) monitor(mon ConnectionMonitor) {
	defer m.wg.Done()
	err := m.monitorConnection(mon)
	// Nothing reports Connected any more: the subscriptions parked while
	// the connection was down go back to their own timers (or stop, below).
	m.parking.Store(false)
	subs := m.snapshot()
	switch {
	case m.ctx.Err() != nil:
		return // Close stops them all
	case err == nil || errors.Is(err, errMonitorPanicked):
	case errors.Is(err, rebound.ErrClosed):
		// The registry client was closed under the Manager: no Subscribe
		// can succeed again, and while the connection is down none would
		// be sent to find out. Stop the subscriptions waiting with nothing
		// scheduled (see registryClosed) with the reason.
		m.log.Info("registry closed: stopping the subscriptions", zap.Int("subscriptions", len(subs)), zap.Error(err))
		for _, s := range subs {
			s.registryClosed(err)
		}
		return
	default:
		m.log.Error("connection monitor stopped", zap.Error(err))
	}
	for _, s := range subs {
		s.unpark()
	}
}

// errMonitorPanicked is monitorConnection's error for a monitor that
// panicked (logged already).
var errMonitorPanicked = errors.New("subscriber: connection monitor panicked")

func (m *Manager) monitorConnection(mon ConnectionMonitor) (err error) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("connection monitor panicked", zap.Any("panic", r), zap.Stack("stack"))
			err = errMonitorPanicked
		}
	}()
	return mon.MonitorConnection(m.ctx, m.onConnection)
}
