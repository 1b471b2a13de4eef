package subscriber

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// lookups are the reconciliation lookups of a subscription (Reconciler):
// the periodic one (WithReconcile), a Refresh's, and the empty-list
// hold's checks, on the timerReconcile entry. Its methods are called with
// the subscription's mutex held, except run.
type lookups struct {
	lastRefresh time.Time
	busy        bool              // a Lookup is in flight
	refresh     bool              // the scheduled Lookup is a Refresh
	res         *rate.Reservation // the token held for the next Lookup
	ctx         context.Context   // of the Lookup in flight
	cancel      context.CancelFunc
}

// on reports whether the Manager looks up: its Registry is a Reconciler
// that has not answered with a permanent error.
func (l *lookups) on(m *Manager) bool { return m.recon != nil && !m.noLookup.Load() }

// pending reports whether a Lookup is in flight or a Refresh's is due.
func (l *lookups) pending() bool { return l.busy || l.refresh }

// schedule schedules the next periodic Lookup, jittered uniformly in
// [0.75, 1.25] of the period.
func (l *lookups) schedule(s *Subscription, now time.Time) {
	p := s.m.opts.reconcile
	if p <= 0 || l.pending() || !l.on(s.m) {
		return
	}
	// p - p/4, not p*3/4: the product overflows for a period above about
	// 97 years (and wrapped to a negative delay: a Lookup on every tick);
	// the jittered sum saturates.
	d := p - p/4
	if j := time.Duration(rand.Int64N(int64(p/2) + 1)); d <= math.MaxInt64-j {
		d += j
	} else {
		d = math.MaxInt64
	}
	s.setTimer(timerReconcile, now.Add(d))
}

// refreshNow schedules a Refresh's Lookup at once.
func (l *lookups) refreshNow(s *Subscription, now time.Time) {
	l.refresh = true
	s.setTimer(timerReconcile, now)
}

// check schedules a Lookup for the empty-list hold at once, unless one is
// already on its way.
func (l *lookups) check(s *Subscription, now time.Time) {
	if !l.pending() && l.res == nil {
		s.setTimer(timerReconcile, now)
	}
}

// confirmed cancels a Refresh's Lookup not sent yet: the adapter's
// evidence answers it.
func (l *lookups) confirmed(s *Subscription, now time.Time) {
	if !l.refresh || l.busy {
		return
	}
	l.refresh = false
	l.giveBack()
	s.cancelTimer(timerReconcile)
	l.schedule(s, now)
}

// stop cancels the Lookup in flight and gives back a token held.
func (l *lookups) stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.giveBack()
}

func (l *lookups) giveBack() {
	if l.res != nil {
		l.res.Cancel()
		l.res = nil
	}
}

// fire runs when the timerReconcile entry is due: the Lookup starts once a
// token of the shared limiter is due.
func (l *lookups) fire(s *Subscription, now time.Time) {
	if s.run.st != rsSubscribed || l.busy {
		// Not subscribed: the next acknowledgement schedules it again.
		l.refresh = false
		return
	}
	if lim := s.m.opts.limiter; lim != nil && l.res == nil {
		if r := lim.ReserveN(now, 1); r.OK() {
			if d := r.DelayFrom(now); d > 0 {
				l.res = r
				s.setTimer(timerReconcile, now.Add(d))
				return
			}
		}
	}
	l.res = nil
	l.busy = true
	refresh := l.refresh
	l.refresh = false
	l.ctx, l.cancel = context.WithTimeout(s.parent, UnsubscribeTimeout)
	s.calls.Add(1)
	s.m.wg.Add(1)
	go l.run(s, s.dq.seq, refresh)
}

// run is one Reconciler.Lookup call; seq is the number of lists received
// when it started.
func (l *lookups) run(s *Subscription, seq uint64, refresh bool) {
	defer s.m.wg.Done()
	s.mu.Lock()
	ctx := l.ctx
	s.mu.Unlock()
	list, err := l.call(s, ctx)
	if err == nil {
		sortInstances(list)
	}
	s.mu.Lock()
	l.busy = false
	l.cancel()
	l.ctx, l.cancel = nil, nil
	now := time.Now()
	var repair, heldEmpty bool
	switch {
	case s.stopped:
	case err != nil:
		if rebound.IsPermanent(err) || errors.Is(err, ErrRegistryClosed) {
			// The adapter cannot read for this Manager (for example a
			// client without the configuration a lookup needs): no more
			// lookups; Refresh resubscribes instead.
			if !s.m.noLookup.Swap(true) {
				s.m.log.Warn("registry lookups unavailable; reconciliation off, Refresh resubscribes", zap.Error(err))
			}
		} else {
			s.m.log.Debug("reconciliation lookup failed", zap.Stringer("key", s.key), zap.Error(err))
		}
		if refresh {
			// The read failed: confirm by resubscribing, paced.
			s.run.step(s, evRefresh, stepIn{now: now})
		}
	case s.dq.seq != seq:
		// A push arrived meanwhile: it is at least as new as the read.
		s.dq.pushDelivery(s, Stale, len(list), now)
	default:
		if cur, ok := s.dq.current(); ok && !sameInstances(cur, list) {
			repair = true
			heldEmpty = !s.hold.since.IsZero()
			s.dq.receive(s, list, now)
			s.disruptLocked(disruptResubscribe, ErrOutOfSync, now)
		}
	}
	if !s.stopped && s.run.st == rsSubscribed {
		l.schedule(s, now)
	}
	s.mu.Unlock()
	s.calls.Done()
	switch {
	case repair && heldEmpty:
		s.m.log.Warn("the registry holds instances for an empty list held after a reconnect; delivering them and resubscribing",
			zap.Stringer("key", s.key), zap.Int("instances", len(list)))
	case repair:
		s.m.log.Warn("reconciliation found the registry's list differs from the delivered one; repairing",
			zap.Stringer("key", s.key), zap.Bool("refresh", refresh))
	}
}

func (l *lookups) call(s *Subscription, ctx context.Context) (list []Instance, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("subscriber: Reconciler.Lookup(%s) panicked: %v", s.key, r)
		}
	}()
	return s.m.recon.Lookup(ctx, s.key)
}
