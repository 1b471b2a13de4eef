package subscriber

import "github.com/rebound-go/rebound"

// A Subscription's events are noted under its lock (noteLocked) and handed
// to the Manager's observers once the lock is released (unlock), in order,
// with no lock held.

// outbox holds the events noted under a Subscription's mu.
type outbox struct {
	evs      []rebound.Event
	flushing bool // a goroutine is handing the events to the observers
}

// noteLocked notes an event for s's observers; unlock hands it over once
// s.mu is released, with d as its Detail. The caller holds s.mu. (d is
// boxed only when there are observers.)
func noteLocked(s *Subscription, e rebound.Event, d SubscriptionEvent) {
	if s.m.observed() {
		e.Detail = d
		s.out.evs = append(s.out.evs, e)
	}
}

// unlock releases s.mu and then hands the events noted under it to the
// observers, in order, with no lock held. One goroutine at a time does so
// for a subscription: one that finds another at it leaves its events to
// that one, which keeps the order.
func (s *Subscription) unlock() {
	if len(s.out.evs) == 0 || s.out.flushing {
		s.mu.Unlock()
		return
	}
	s.out.flushing = true
	s.flushLocked()
}

// unlockOnScheduler is unlock for the scheduler goroutine's timers: the
// events are handed over by a job of the scheduler, which runs right
// after the timers due now, under the same rescue as an attempt (a slow
// observer moves the scheduler to a new goroutine after timerSlack, as a
// slow registry call does).
func (s *Subscription) unlockOnScheduler() {
	if len(s.out.evs) > 0 && !s.out.flushing {
		s.out.flushing = true
		s.m.sched.enqueue(job{r: s, flush: true})
	}
	s.mu.Unlock()
}

// flushJob is the scheduler job of unlockOnScheduler.
func (s *Subscription) flushJob() {
	s.mu.Lock()
	s.flushLocked()
}

// flushLocked hands the outbox to the observers until it is empty. The
// caller holds s.mu and has set s.out.flushing; s.mu is released on
// return.
func (s *Subscription) flushLocked() {
	for len(s.out.evs) > 0 {
		evs := s.out.evs
		s.out.evs = nil
		s.mu.Unlock()
		s.m.emit(evs...)
		s.mu.Lock()
	}
	s.out.flushing = false
	s.mu.Unlock()
}
