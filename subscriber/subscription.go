package subscriber

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

func newDefaultLimiter() *rate.Limiter { return rate.NewLimiter(defaultLimit, defaultBurst) }

// errResubscribe is the reason shown when an adapter calls
// Sink.Resubscribe(nil).
var errResubscribe = errors.New("subscriber: registry asked to resubscribe")

// The scheduler entries of a subscription (timerKind).
const (
	timerRetry     timerKind = iota // the next attempt (after a backoff delay or for a limiter token)
	timerConfirm                    // the safety cap on a confirming adapter's evidence
	timerHold                       // the end of an empty-list hold
	timerReconcile                  // the next reconciliation or a Refresh lookup
	numTimers
)

// Subscription is one subscription started by Manager.Subscribe. Its methods
// are safe for concurrent use (docs/subscription.md).
type Subscription struct {
	m        *Manager
	id       uint64
	key      Key
	listener func([]Instance)
	parent   context.Context // the ctx given to Subscribe
	sink     sink            // the stable Sink handed to the Registry
	calls    sync.WaitGroup  // Registry.Subscribe and Lookup calls in progress
	retryT   entry           // the scheduler entry of the next attempt

	mu        sync.Mutex
	state     State
	stopped   bool
	acked     bool          // acknowledged once: ready is (or will be made) closed
	finished  bool          // stopped and unsubscribed: done is (or will be made) closed
	ready     chan struct{} // closed on the first acknowledgement; made when first asked for (Ready)
	done      chan struct{} // closed when finished; made when first asked for (Done)
	since     time.Time
	stopErr   error
	lastErr   error
	stopAfter func() bool
	run       runCtl
	dq        deliveryQ
	hold      emptyHold
	look      lookups
	log       *logging.Loop // created at the first attempt's end, if the Manager logs
	aux       *subAux       // allocated when first needed
	out       outbox        // events noted under mu for the observers (outbox.go)
}

// subAux is the part of a subscription that a pending or plainly
// subscribed one does not use: its scheduler entries other than the retry
// timer, and the adapter's last evidence. Most subscriptions never
// allocate it (docs/subscription.md, "Memory").
type subAux struct {
	timers  [numTimers - 1]entry
	confAt  time.Time
	confWhy string
}

// closedChan is the channel Ready and Done return when asked for the first
// time after the event they signal.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// auxLocked returns s.aux, allocating it if needed. The caller holds s.mu.
func (s *Subscription) auxLocked() *subAux {
	if s.aux == nil {
		s.aux = new(subAux)
		for i := range s.aux.timers {
			s.aux.timers[i] = newEntry(s, timerKind(i+1))
		}
	}
	return s.aux
}

// timer returns the scheduler entry of kind, allocating it if needed. The
// caller holds s.mu.
func (s *Subscription) timer(k timerKind) *entry {
	if k == timerRetry {
		return &s.retryT
	}
	return &s.auxLocked().timers[k-1]
}

// setTimer (re)schedules the entry of kind at at. The caller holds s.mu.
func (s *Subscription) setTimer(k timerKind, at time.Time) { s.m.sched.set(s.timer(k), at) }

// setTokenTimer schedules the entry of kind at at, when a limiter token
// reserved for it is due, on a grid fine enough for the limiter (see
// scheduler.setWithin). The caller holds s.mu.
func (s *Subscription) setTokenTimer(k timerKind, at time.Time) {
	s.m.sched.setWithin(s.timer(k), at, tokenStep(s.m.opts.limiter))
}

// tokenStep is the coarsest grid step for the token waits of l:
// (burst-1)/rate.
func tokenStep(l *rate.Limiter) time.Duration {
	if l == nil {
		return maxTimerSlack
	}
	lim, b := float64(l.Limit()), l.Burst()
	if math.IsInf(lim, 1) || lim <= 0 {
		return maxTimerSlack // no wait, or one that never ends
	}
	step := float64(b-1) / lim * float64(time.Second)
	if step >= float64(maxTimerSlack) {
		return maxTimerSlack
	}
	return time.Duration(step)
}

// cancelTimer cancels the scheduler entry of kind, if it exists. The
// caller holds s.mu.
func (s *Subscription) cancelTimer(k timerKind) {
	if k == timerRetry {
		s.m.sched.cancel(&s.retryT)
	} else if s.aux != nil {
		s.m.sched.cancel(&s.aux.timers[k-1])
	}
}

// loopLocked returns the subscription's throttled retry log. The caller
// holds s.mu.
func (s *Subscription) loopLocked() *logging.Loop {
	if s.log == nil && s.m.logs {
		s.log = logging.NewLoop(s.m.loopLog, "", zap.Stringer("key", s.key))
	}
	return s.log
}

// sink is the Sink of one subscription.
type sink struct{ s *Subscription }

func (k *sink) Update(instances []Instance) { k.s.update(instances) }

func (k *sink) Resubscribe(err error) {
	if err == nil {
		err = errResubscribe
	}
	k.s.disrupt(disruptResubscribe, err)
}

func (k *sink) Confirmed(reason string) { k.s.confirmed(reason) }

func newSubscription(m *Manager, ctx context.Context, key Key, l func([]Instance)) *Subscription {
	s := &Subscription{
		m:        m,
		key:      key,
		listener: l,
		parent:   ctx,
		run:      runCtl{st: rsNew},
	}
	s.sink.s = s
	s.retryT = newEntry(s, timerRetry)
	return s
}

// start runs the first attempt at once (no token: the limiter paces
// retries and re-confirmations, not new subscriptions; nor the throttle,
// see WithThrottle).
func (s *Subscription) start() {
	s.mu.Lock()
	defer s.unlock()
	if s.stopped {
		return
	}
	s.setStateLocked(StatePending, nil)
	if s.parent.Done() != nil {
		s.stopAfter = context.AfterFunc(s.parent, s.onCtxDone)
	}
	s.run.step(s, evStart, stepIn{now: time.Now()})
}

// keyCopy returns the subscription's key, with its own Clusters.
func (s *Subscription) keyCopy() Key {
	k := s.key
	k.Clusters = slices.Clone(k.Clusters)
	return k
}

// Ready returns a channel closed at the registry's first acknowledgement.
// It stays open if the subscription stops first: select on Done too.
func (s *Subscription) Ready() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready == nil {
		if s.acked {
			return closedChan
		}
		s.ready = make(chan struct{})
	}
	return s.ready
}

// Done returns a channel closed once the subscription stopped and the
// registry's Unsubscribe returned.
func (s *Subscription) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.finished {
			return closedChan
		}
		s.done = make(chan struct{})
	}
	return s.done
}

// Err returns nil while the subscription runs, then why it stopped: an
// error matching rebound.ErrClosed (Unsubscribe, the Manager's or the
// registry's Close), ctx's cause or a permanent error.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.unlock()
	return s.stopErr
}

// Status returns a snapshot of the subscription.
func (s *Subscription) Status() Status {
	s.mu.Lock()
	defer s.unlock()
	return s.statusLocked()
}

func (s *Subscription) statusLocked() Status {
	st := Status{
		ID: s.id, Key: s.keyCopy(), State: s.state, Since: s.since, LastErr: s.lastErr,
	}
	if s.aux != nil {
		st.ConfirmedAt, st.ConfirmReason = s.aux.confAt, s.aux.confWhy
	}
	s.run.status(&st)
	s.dq.status(&st)
	s.hold.status(&st, s.m.opts.hold)
	if s.stopped {
		st.LastErr = s.stopErr
	}
	return st
}

// Unsubscribe stops the subscription and calls the registry's Unsubscribe
// (bounded by 10 s), returning its error. A listener call may still run. It
// may be called from the listener; on a stopped subscription it returns nil.
func (s *Subscription) Unsubscribe() error {
	if !s.stop(errUnsubscribed) {
		<-s.Done()
		return nil
	}
	return s.finish()
}

// refresh asks for a paced re-confirmation of the subscription and
// returns at once: one Lookup with a Reconciler (repaired like a
// reconciliation), else one Registry.Subscribe. Calls are coalesced: at
// most one request per subscription per refresh interval, none unless
// the subscription is subscribed. View.Refresh calls it.
func (s *Subscription) refresh() {
	s.mu.Lock()
	defer s.unlock()
	now := time.Now()
	if s.stopped || s.run.st != rsSubscribed || s.look.pending() ||
		(!s.look.lastRefresh.IsZero() && now.Sub(s.look.lastRefresh) < s.m.opts.refreshMin) {
		return
	}
	s.look.lastRefresh = now
	if s.look.on(s.m) {
		s.look.refreshNow(s, now)
		return
	}
	s.run.step(s, evRefresh, stepIn{now: now})
}

// stop marks the subscription stopped; it returns false if it already was.
// The caller that gets true must call finish.
func (s *Subscription) stop(cause error) bool {
	s.mu.Lock()
	if s.stopped {
		s.unlock()
		return false
	}
	s.stopped = true
	s.stopErr = cause
	s.run.step(s, evStop, stepIn{now: time.Now()}) // every timer, the attempt in flight, a token held
	s.look.stop(time.Now())
	s.dq.latest, s.dq.hasLatest = nil, false
	s.hold.since = time.Time{}
	s.setStateLocked(StateStopped, cause)
	s.unlock()
	return true
}

// registryClosed stops the subscription with err (the ConnectionMonitor's
// closed error) if it waits with no attempt scheduled or in flight:
// subscribed, awaiting a confirming adapter's evidence, or parked until
// the connection is back (park.go). Such a
// subscription would never learn that the registry is closed. One with an
// attempt to come learns it from that attempt, like any other permanent
// error (so its attempts are counted the same way whatever the timing).
func (s *Subscription) registryClosed(err error) {
	s.mu.Lock()
	waiting := !s.stopped && (s.run.st == rsAwaiting || s.run.st == rsSubscribed || s.run.parked)
	s.unlock()
	if waiting && s.stop(err) {
		s.finish()
	}
}

// finish waits for the registry calls in flight, unsubscribes from the
// registry and closes done. It runs once per subscription, after stop
// returned true.
func (s *Subscription) finish() error {
	s.calls.Wait()
	s.mu.Lock()
	called, stopAfter, cause := s.run.total > 0, s.stopAfter, s.stopErr
	s.unlock()
	if stopAfter != nil {
		stopAfter()
	}
	var err error
	if called {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), unsubscribeTimeout)
		err = s.unsubscribe(ctx)
		cancel()
		switch {
		case errors.Is(err, rebound.ErrClosed):
			// A closed registry client holds no subscription any more.
			s.m.log.Debug("registry unsubscribe: registry closed", zap.Stringer("key", s.key), zap.Error(err))
		case err != nil:
			s.m.log.Warn("registry unsubscribe failed", zap.Stringer("key", s.key), zap.Error(err))
		}
	}
	switch {
	case errors.Is(cause, errUnsubscribed), errors.Is(cause, errManagerClosed):
		s.m.log.Debug("subscription stopped", zap.Stringer("key", s.key), zap.Error(cause))
	default:
		s.m.log.Info("subscription stopped", zap.Stringer("key", s.key), zap.Error(cause))
	}
	s.m.retire(s)
	s.mu.Lock()
	s.finished = true
	done := s.done
	s.mu.Unlock()
	if done != nil {
		close(done)
	}
	return err
}

func (s *Subscription) unsubscribe(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("subscriber: Registry.Unsubscribe(%s) panicked: %v", s.key, r)
		}
	}()
	return s.m.reg.Unsubscribe(ctx, s.key, &s.sink)
}

// onCtxDone runs (in its own goroutine) when the Subscribe ctx is done.
func (s *Subscription) onCtxDone() {
	if !s.m.track() {
		return // Close stops the subscription
	}
	defer s.m.wg.Done()
	if s.stop(context.Cause(s.parent)) {
		s.finish()
	}
}

// setStateLocked moves the subscription to st and reports the change.
func (s *Subscription) setStateLocked(st State, reason error) {
	from := s.state
	if from == st {
		return
	}
	now := time.Now()
	s.state, s.since = st, now
	s.m.countState(from, st)
	noteLocked(s, rebound.Event{Kind: rebound.EventStateChanged, Err: reason},
		SubscriptionEvent{Key: s.key, ID: s.id, From: from, To: st, At: now})
}

// settledLocked is the state of a confirmed subscription.
func (s *Subscription) settledLocked() State {
	if !s.hold.since.IsZero() {
		return StateHeld
	}
	return StateSubscribed
}

// closeReadyLocked closes ready, once.
func (s *Subscription) closeReadyLocked() {
	if !s.acked {
		s.acked = true
		if s.ready != nil {
			close(s.ready)
		}
	}
}

// onTimer is called by the scheduler, with no lock held, when e is due.
func (s *Subscription) onTimer(e *entry, gen uint32, now time.Time) {
	s.mu.Lock()
	defer s.unlockOnScheduler()
	if e.gen != gen || s.stopped {
		return // moved or cancelled after it was popped
	}
	switch e.kind {
	case timerRetry:
		s.run.fire(s, now)
	case timerConfirm:
		s.run.step(s, evConfirmTimeout, stepIn{now: now})
	case timerHold:
		if s.hold.checkDue(s, now) {
			s.look.check(s, now) // ask the server, unless a Lookup is already on its way
		}
		s.dq.kick(s) // delivers the list if the hold is over, or sets the next timer
	case timerReconcile:
		s.look.fire(s, now)
	}
}

// runJob runs an attempt the scheduler was given (runCtl.launch).
func (s *Subscription) runJob(ctx context.Context, n int) { s.run.attempt(s, ctx, n) }

// disruptKind says why a subscription must be confirmed again.
type disruptKind uint8

const (
	disruptLost        disruptKind = iota // ConnectionMonitor: Disconnected
	disruptReconnected                    // ConnectionMonitor: Connected
	disruptResubscribe                    // Sink.Resubscribe, or a reconciliation found a difference
)

var disruptEvents = [...]runEvent{disruptLost: evLost, disruptReconnected: evReconnected, disruptResubscribe: evResubscribe}

// disrupt makes the subscription confirm itself again.
func (s *Subscription) disrupt(kind disruptKind, reason error) {
	s.mu.Lock()
	defer s.unlock()
	s.disruptLocked(kind, reason, time.Now())
}

func (s *Subscription) disruptLocked(kind disruptKind, reason error, now time.Time) {
	if s.stopped {
		return
	}
	s.hold.disrupted(kind)
	if reason != nil {
		s.lastErr = reason
	}
	s.run.step(s, disruptEvents[kind], stepIn{now: now, reason: reason})
}

// confirmed is Sink.Confirmed.
func (s *Subscription) confirmed(reason string) {
	s.mu.Lock()
	defer s.unlock()
	if s.stopped {
		return
	}
	now := time.Now()
	a := s.auxLocked()
	a.confAt, a.confWhy = now, reason
	s.m.watches.confirmed(&s.sink) // the registry answered: a view's unresolved error clears
	if s.run.step(s, evConfirmed, stepIn{now: now, confirm: reason}).acked {
		return // the ack reported the confirmation
	}
	s.look.confirmed(s, now)
	noteLocked(s, rebound.Event{Kind: rebound.EventConfirmed},
		SubscriptionEvent{Key: s.key, ID: s.id, Reason: reason, At: now, evidence: true})
}

// update is Sink.Update.
func (s *Subscription) update(list []Instance) {
	sortInstances(list)
	s.mu.Lock()
	defer s.unlock()
	if s.stopped {
		return
	}
	s.dq.receive(s, list, time.Now())
}
