package subscriber

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// lookups are the reconciliation lookups of a subscription (Reconciler):
// the periodic one (WithReconcile), a Refresh's, and the empty-list
// hold's checks, on the timerReconcile entry. Its methods are called with
// the subscription's mutex held, except run.
type lookups struct {
	lastRefresh time.Time
	phase       lookPhase
	refresh     bool              // the scheduled Lookup is a Refresh
	sch         *rebound.Schedule // the lookups' admission: a Schedule of the Manager's retrier, created when first needed
	ctx         context.Context   // of the Lookup in flight
	cancel      context.CancelFunc
}

// lookPhase is where the next or current Lookup is.
type lookPhase uint8

const (
	lookIdle  lookPhase = iota // none due, or due at the timer
	lookToken                  // admitted, waiting for its limiter token at the timer
	lookBusy                   // in flight
)

// on reports whether the Manager looks up: its Registry is a Reconciler
// that has not answered with a permanent error.
func (l *lookups) on(m *Manager) bool { return m.recon != nil && !m.noLookup.Load() }

// pending reports whether a Lookup is in flight or a Refresh's is due.
func (l *lookups) pending() bool { return l.phase == lookBusy || l.refresh }

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
	if !l.pending() && l.phase != lookToken {
		s.setTimer(timerReconcile, now)
	}
}

// confirmed cancels a Refresh's Lookup not sent yet: the adapter's
// evidence answers it.
func (l *lookups) confirmed(s *Subscription, now time.Time) {
	if !l.refresh || l.phase == lookBusy {
		return
	}
	l.refresh = false
	l.giveBack(now)
	s.cancelTimer(timerReconcile)
	l.schedule(s, now)
}

// stop cancels the Lookup in flight and gives back a token held.
func (l *lookups) stop(now time.Time) {
	if l.cancel != nil {
		l.cancel()
	}
	l.giveBack(now)
}

func (l *lookups) giveBack(now time.Time) {
	if l.phase == lookToken {
		l.sch.Cancel(now)
		l.phase = lookIdle
	}
}

// fire runs when the timerReconcile entry is due: the Lookup starts once
// the engine admits it (a token of the shared limiter).
func (l *lookups) fire(s *Subscription, now time.Time) {
	if l.phase == lookBusy {
		l.refresh = false
		return
	}
	if s.run.st != rsSubscribed {
		// Not subscribed: the next acknowledgement schedules it again. A
		// token it waited for is given back: left waiting, the phase
		// would turn every later check of the hold away (check).
		l.refresh = false
		l.giveBack(now)
		return
	}
	if l.sch == nil {
		l.sch = s.m.retrier.NewSchedule(now)
	}
	stop, delay, reason, _ := admit.Lookup(l.sch, now)
	if stop {
		// A limiter that can never grant a token (its burst set to 0
		// after New): nothing is sent past it; the next period asks again.
		l.refresh = false
		l.schedule(s, now)
		return
	}
	if delay > 0 {
		l.phase = lookToken
		if reason == nil {
			s.setTokenTimer(timerReconcile, now.Add(delay)) // sent when its token is due
		} else {
			s.setTimer(timerReconcile, now.Add(delay)) // refused by the throttle: asked again later
		}
		return
	}
	l.phase = lookBusy
	refresh := l.refresh
	l.refresh = false
	l.ctx, l.cancel = context.WithTimeout(s.parent, unsubscribeTimeout)
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
	s.unlock()
	list, err := l.call(s, ctx)
	if err == nil {
		sortInstances(list)
	}
	s.mu.Lock()
	l.phase = lookIdle
	l.cancel()
	l.ctx, l.cancel = nil, nil
	now := time.Now()
	var repair, heldEmpty bool
	switch {
	case s.stopped:
	case err != nil:
		if rebound.IsPermanent(err) || errors.Is(err, rebound.ErrClosed) {
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
		s.dq.pushDelivery(s, resStale, len(list), now)
	default:
		if cur, ok := s.dq.current(); ok && !sameInstances(cur, list) {
			repair = true
			heldEmpty = !s.hold.since.IsZero()
			s.dq.receive(s, list, now)
			s.disruptLocked(disruptResubscribe, errOutOfSync, now)
		}
	}
	if !s.stopped && s.run.st == rsSubscribed {
		l.schedule(s, now)
	}
	s.unlock()
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
