package subscriber

import (
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// deliveryQ is the delivery queue of a subscription: the newest list
// received and not yet delivered, the last one delivered, and the
// goroutine that calls the listener while there is something to deliver.
// Its methods are called with the subscription's mutex held, except loop
// and call.
type deliveryQ struct {
	latest     []Instance // newest list received, not yet delivered
	last       []Instance // last list delivered
	seq        uint64     // lists received
	deliveries int
	lastAt     time.Time // when the last delivery started
	hasLatest  bool
	hasLast    bool
	delivering bool // the delivery goroutine is running
}

// status fills the delivery queue's part of a Status.
func (q *deliveryQ) status(st *Status) {
	st.Instances, st.Deliveries, st.LastDelivery = len(q.last), q.deliveries, q.lastAt
}

// current is the newest list known: the one waiting, else the last
// delivered.
func (q *deliveryQ) current() ([]Instance, bool) {
	if q.hasLatest {
		return q.latest, true
	}
	return q.last, q.hasLast
}

// receive queues a list the adapter handed over (or a reconciliation
// read); one waiting is replaced (stale).
func (q *deliveryQ) receive(s *Subscription, list []Instance, now time.Time) {
	if q.hasLatest {
		q.pushDelivery(s, resStale, len(q.latest), now)
	}
	q.latest, q.hasLatest = list, true
	q.seq++
	if len(list) > 0 && !s.hold.since.IsZero() {
		s.hold.end(s)
	}
	q.kick(s)
}

func (q *deliveryQ) pushDelivery(s *Subscription, r string, n int, now time.Time) {
	noteLocked(s, rebound.Event{Kind: rebound.EventDelivered},
		SubscriptionEvent{Key: s.key, ID: s.id, Result: r, Instances: n, At: now})
}

// kick starts the delivery goroutine if there is a list to deliver.
func (q *deliveryQ) kick(s *Subscription) {
	if q.delivering || s.stopped || !q.hasLatest {
		return
	}
	q.delivering = true
	s.m.wg.Add(1)
	go q.loop(s)
}

// loop is the delivery goroutine: it calls the listener with the latest
// list until there is nothing left to deliver now.
func (q *deliveryQ) loop(s *Subscription) {
	defer s.m.wg.Done()
	defer s.m.inCB.enter()()
	for {
		s.mu.Lock()
		now := time.Now()
		list, ok := q.next(s, now)
		if !ok {
			q.delivering = false
			s.unlock()
			return
		}
		q.deliveries++
		q.lastAt = now
		s.unlock()
		q.call(s, list)
	}
}

// next decides what to deliver now: a list (ok), or nothing (a held-back
// empty list has its timer set).
func (q *deliveryQ) next(s *Subscription, now time.Time) (list []Instance, ok bool) {
	if s.stopped || !q.hasLatest {
		return nil, false
	}
	if q.hasLast && sameInstances(q.latest, q.last) {
		q.pushDelivery(s, resDuplicate, len(q.latest), now)
		q.latest, q.hasLatest = nil, false
		return nil, false
	}
	// An empty list is held in the window if it would replace a non-empty
	// one, or if it is the subscription's first list.
	if len(q.latest) == 0 && (len(q.last) > 0 || !q.hasLast) && s.hold.holds(s, now, !q.hasLast) {
		return nil, false
	}
	list = q.latest
	q.latest, q.hasLatest = nil, false
	q.last, q.hasLast = list, true
	if !s.hold.since.IsZero() {
		s.hold.end(s)
	}
	q.pushDelivery(s, resDelivered, len(list), now)
	return list, true
}

// call runs the listener, recovering a panic.
func (q *deliveryQ) call(s *Subscription, list []Instance) {
	defer func() {
		if r := recover(); r != nil {
			s.m.log.Error("listener panicked", zap.Stringer("key", s.key),
				zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	s.listener(list)
}
