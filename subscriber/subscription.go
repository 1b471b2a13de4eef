package subscriber

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

func newDefaultLimiter() *rate.Limiter { return rate.NewLimiter(DefaultLimit, DefaultBurst) }

// errResubscribe is the reason shown when an adapter calls
// Sink.Resubscribe(nil).
var errResubscribe = errors.New("subscriber: registry asked to resubscribe")

// Subscription is one subscription started by Manager.Subscribe. Its
// methods are safe for concurrent use.
//
// Internals: a subscription is three small parts under one mutex, each
// with explicit states: the run control (idle, scheduled, in flight,
// awaiting evidence, stopped), the delivery queue (latest list, last
// delivered list) and the empty-list hold (window, held since). Waiting
// (for a backoff delay, a limiter token, evidence, the end of a hold)
// costs an entry in the Manager's one scheduler, no goroutine and no timer
// of its own. Retries run on the scheduler goroutine; a goroutine of the
// subscription's own runs only for its first attempt, a Lookup, or while
// lists are being delivered to its listener.
type Subscription struct {
	m        *Manager
	id       uint64
	key      Key
	listener Listener
	parent   context.Context // the ctx given to Subscribe
	sink     sink            // the stable Sink handed to the Registry
	ready    chan struct{}   // closed on the first acknowledgement
	done     chan struct{}   // closed when stopped and unsubscribed
	calls    sync.WaitGroup  // Registry.Subscribe and Lookup calls in progress
	retryT   entry           // the scheduler entry of the next attempt

	mu        sync.Mutex
	state     State
	since     time.Time
	stopped   bool
	stopErr   error
	lastErr   error
	stopAfter func() bool
	run       runCtl
	dq        deliveryQ
	hold      emptyHold
	confAt    time.Time
	confWhy   string
	confDL    time.Time             // deadline of a wait for evidence
	log       *logging.Loop         // created at the first attempt's end
	extra     *[numTimers - 1]entry // the other scheduler entries, allocated when first needed
	outbox    []rebound.Event       // events noted under mu, handed to the observers by unlock
	flushing  bool                  // a goroutine is handing the outbox to the observers
}

// noteLocked notes an event for s's observers; unlock hands it over once
// s.mu is released. The caller holds s.mu. (A function of a type
// parameter, so that detail is boxed only when there are observers.)
func noteLocked[D any](s *Subscription, detail D) {
	if s.m.observed() {
		s.outbox = append(s.outbox, event(detail))
	}
}

// unlock releases s.mu and then hands the events noted under it to the
// observers, in order, with no lock held. One goroutine at a time does so
// for a subscription: one that finds another at it leaves its events to
// that one, which keeps the order.
func (s *Subscription) unlock() {
	if len(s.outbox) == 0 || s.flushing {
		s.mu.Unlock()
		return
	}
	s.flushing = true
	s.flushLocked()
}

// unlockOnScheduler is unlock for the scheduler goroutine's timers: the
// events are handed over by a job of the scheduler, which runs right
// after the timers due now, under the same rescue as an attempt (a slow
// observer moves the scheduler to a new goroutine after TimerSlack, as a
// slow registry call does).
func (s *Subscription) unlockOnScheduler() {
	if len(s.outbox) > 0 && !s.flushing {
		s.flushing = true
		s.m.sched.enqueue(job{s: s, flush: true})
	}
	s.mu.Unlock()
}

// flush is the scheduler job of unlockOnScheduler.
func (s *Subscription) flush() {
	s.mu.Lock()
	s.flushLocked()
}

// flushLocked hands the outbox to the observers until it is empty. The
// caller holds s.mu and has set s.flushing; s.mu is released on return.
func (s *Subscription) flushLocked() {
	for len(s.outbox) > 0 {
		evs := s.outbox
		s.outbox = nil
		s.mu.Unlock()
		s.m.emit(evs...)
		s.mu.Lock()
	}
	s.flushing = false
	s.mu.Unlock()
}

// timer returns the scheduler entry of kind, allocating it if needed. The
// caller holds s.mu.
func (s *Subscription) timer(k timerKind) *entry {
	if k == timerRetry {
		return &s.retryT
	}
	if s.extra == nil {
		s.extra = new([numTimers - 1]entry)
		for i := range s.extra {
			s.extra[i] = entry{s: s, index: -1, kind: timerKind(i + 1)}
		}
	}
	return &s.extra[k-1]
}

// cancelTimer cancels the scheduler entry of kind, if it exists. The
// caller holds s.mu.
func (s *Subscription) cancelTimer(k timerKind) {
	if k == timerRetry {
		s.m.sched.cancel(&s.retryT)
	} else if s.extra != nil {
		s.m.sched.cancel(&s.extra[k-1])
	}
}

// loopLocked returns the subscription's throttled retry log. The caller
// holds s.mu.
func (s *Subscription) loopLocked() *logging.Loop {
	if s.log == nil {
		s.log = logging.NewLoop(s.m.loopLog, "", zap.Stringer("key", s.key))
	}
	return s.log
}

// runPhase is the state of a subscription's retry-run control.
type runPhase uint8

const (
	phaseIdle      runPhase = iota // nothing to do: subscribed (or stopped before the first attempt)
	phaseScheduled                 // the next attempt is due at timers[timerRetry]
	phaseInFlight                  // a Registry.Subscribe call is running
	phaseAwaiting                  // waiting for a ReconnectConfirmer's evidence
	phaseStopped
)

// runCtl is the retry-run control of a subscription.
type runCtl struct {
	phase     runPhase
	acked     bool // ready is closed
	called    bool // Registry.Subscribe was called at least once
	needToken bool // the scheduled attempt takes a limiter token first (Schedule.Admit)
	tokenHeld bool // Admit reserved a token that is not due yet
	again     bool // a disruption came during the attempt in flight: one more after it
	refresh   bool // the scheduled or in-flight attempt is a Refresh of a subscribed subscription
	cancel    context.CancelFunc
	sch       *rebound.Schedule // of the current confirmation; nil while subscribed
	attempts  int               // of the current confirmation
	total     int
	retry     bool  // the scheduled attempt is a retry after a failure: it withdraws from the budget
	withdrawn bool  // the budget allowed the scheduled retry already
	allowed   bool  // the throttle allowed the scheduled retry already
	deferred  int   // attempts deferred locally (throttle, budget)
	deferWhy  error // why the last due attempt was deferred; nil once one is sent

	lastRefresh   time.Time
	lookupBusy    bool              // a Lookup is in flight
	lookupRes     *rate.Reservation // the token held for the next Lookup
	lookupRefresh bool              // the scheduled Lookup is a Refresh
	lookupCtx     context.Context   // of the Lookup in flight
	lookupCancel  context.CancelFunc
}

// deliveryQ is the delivery queue of a subscription.
type deliveryQ struct {
	latest     []Instance // newest list received, not yet delivered
	hasLatest  bool
	last       []Instance // last list delivered
	hasLast    bool
	seq        uint64 // lists received
	delivering bool   // the delivery goroutine is running
	deliveries int
	lastAt     time.Time // when the last delivery started
}

// emptyHold is the empty-list hold of a subscription. The window opens
// when the registry connection is lost or re-established and closes hold
// after the subscription is confirmed again; an empty list that arrives
// in the window is held back (never longer than hold after its arrival).
type emptyHold struct {
	window    bool
	windowEnd time.Time // zero while not confirmed since the window opened
	why       string
	since     time.Time // when the held empty list arrived; zero: nothing held
	first     bool      // the held list is the subscription's first
	checks    uint8     // Lookups of the server made (or due) during this hold
}

// holdCheckAtLocked is when the current hold's next Lookup of the server is
// due (see WithEmptyListHold): hold/8 after the empty list arrived, then
// hold/4 and hold/2. It returns the zero time when nothing is held, when
// the Manager cannot look up, when no check is left before the hold ends
// (until), or while the subscription is not confirmed (a due check waits
// for the acknowledgement, whose delivery kick sets the timer again). The
// caller holds s.mu.
//
// Why: an empty list held after a reconnect is ended by the providers'
// re-registration push. If that push never reaches the adapter (lost, or
// overwritten in the SDK's cache by an older empty reply: nacos-sdk-go
// v2.3.2's ProcessService compares and stores without a lock), nothing
// else would end the hold before its cap, and the listener would then be
// given an empty list the registry does not hold.
func (s *Subscription) holdCheckAtLocked(until time.Time) time.Time {
	if s.hold.since.IsZero() || s.m.recon == nil || s.m.noLookup.Load() || s.hold.checks >= 3 || s.run.phase != phaseIdle {
		return time.Time{}
	}
	at := s.hold.since.Add(s.m.opts.hold / 8 << s.hold.checks)
	if !at.Before(until) {
		return time.Time{}
	}
	return at
}

// openFirstWindow opens the hold window of a new subscription created
// while the registry connection is down (the Connected report to come
// reopens it) or within hold of the last Connected report (the window
// then closes hold after that report), so that an empty first list from a
// registry that restarted empty is held like any other. It runs before
// the subscription starts; the caller holds m.mu.
func (s *Subscription) openFirstWindow(down bool, upAt time.Time) {
	hold := s.m.opts.hold
	switch {
	case hold <= 0:
	case down:
		s.hold.window, s.hold.why = true, "registry connection lost"
	case !upAt.IsZero() && time.Since(upAt) < hold:
		s.hold.window, s.hold.why = true, "registry reconnected"
		s.hold.windowEnd = upAt.Add(hold)
	}
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

func newSubscription(m *Manager, ctx context.Context, key Key, l Listener) *Subscription {
	s := &Subscription{
		m:        m,
		key:      key,
		listener: l,
		parent:   ctx,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.sink.s = s
	s.retryT = entry{s: s, index: -1, kind: timerRetry}
	return s
}

// start runs the first attempt at once (no token: the limiter paces
// retries and re-confirmations, not new subscriptions).
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
	s.launchLocked(false) // nor the throttle or budget (WithThrottle)
}

// Key returns the subscription's key.
func (s *Subscription) Key() Key {
	k := s.key
	k.Clusters = slices.Clone(k.Clusters)
	return k
}

// Ready returns a channel closed when the registry first acknowledges the
// subscription. The first list reaches the listener around the same time
// (adapters report it during or right after the acknowledgement), unless
// it is an empty list held back after a reconnect (WithEmptyListHold). Ready
// stays open if the subscription stops before that; select on Done too.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Done returns a channel closed when the subscription has stopped and the
// registry's Unsubscribe has returned.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns nil while the subscription runs, and why it stopped
// afterwards: an error wrapping ErrUnsubscribed, ErrManagerClosed, the
// Subscribe context's cause, or the registry's permanent error.
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
		ID:            s.id,
		Key:           s.Key(),
		State:         s.state,
		Since:         s.since,
		Attempts:      s.run.attempts,
		TotalAttempts: s.run.total,
		LastErr:       s.lastErr,
		Instances:     len(s.dq.last),
		Deliveries:    s.dq.deliveries,
		LastDelivery:  s.dq.lastAt,
		ConfirmedAt:   s.confAt,
		ConfirmReason: s.confWhy,
		Deferred:      s.run.deferred,
		DeferReason:   s.run.deferWhy,
	}
	if s.run.phase == phaseAwaiting {
		st.ConfirmDeadline = s.confDL
	}
	if !s.hold.since.IsZero() {
		st.HeldSince, st.HeldReason = s.hold.since, s.hold.why
		if s.hold.first {
			st.HeldReason = "first list empty; " + s.hold.why
		}
		st.HeldUntil = s.hold.untilLocked(s.m.opts.hold)
	}
	if s.stopped {
		st.LastErr = s.stopErr
	}
	return st
}

// Unsubscribe stops the subscription: no further attempt is made (one in
// flight is cancelled and waited for), no further list is delivered, and
// the registry's Unsubscribe is called (bounded by UnsubscribeTimeout); its
// error, if any, is returned. A listener call that had already started may
// still be running when Unsubscribe returns; Unsubscribe may be called from
// the listener itself. Calling Unsubscribe on a stopped subscription waits
// until it has finished stopping and returns nil.
func (s *Subscription) Unsubscribe() error {
	if !s.stop(ErrUnsubscribed) {
		<-s.done
		return nil
	}
	return s.finish()
}

// Refresh asks for a paced re-confirmation of the subscription and returns
// at once. With a Registry that implements Reconciler it is one Lookup
// (repaired like a reconciliation when the list differs; a failed Lookup
// falls back to a Subscribe, and a permanent Lookup error turns lookups off
// for the Manager); otherwise one Registry.Subscribe call. Either takes a token of the shared limiter
// first. Calls are coalesced: a call does nothing while the subscription
// is pending, retrying, stopped, waiting for a ReconnectConfirmer's
// evidence or already refreshing, or within WithRefreshInterval (default
// 5 s) of the last refresh it started; so any number of calls costs at
// most one registry request per subscription per interval. A Sink.Confirmed
// that arrives before the request is sent cancels it. The state stays
// subscribed unless the request fails. A gRPC resolver's ResolveNow calls
// it.
func (s *Subscription) Refresh() {
	s.mu.Lock()
	defer s.unlock()
	now := time.Now()
	if s.stopped || s.run.phase != phaseIdle || !s.run.acked || s.run.lookupBusy || s.run.lookupRefresh ||
		(!s.run.lastRefresh.IsZero() && now.Sub(s.run.lastRefresh) < s.m.opts.refreshMin) {
		return
	}
	s.run.lastRefresh = now
	if s.m.recon != nil && !s.m.noLookup.Load() {
		s.run.lookupRefresh = true
		s.m.sched.set(s.timer(timerReconcile), now)
		return
	}
	s.run.refresh = true
	s.scheduleLocked(now, true)
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
	s.run.phase = phaseStopped
	for k := range numTimers {
		s.cancelTimer(k)
	}
	if s.run.cancel != nil {
		s.run.cancel() // ends the attempt in flight
	}
	if s.run.lookupCancel != nil {
		s.run.lookupCancel()
	}
	if s.run.sch != nil && s.run.tokenHeld {
		s.run.sch.Cancel(time.Now()) // a token reserved for an attempt that will not run
	}
	s.run.sch = nil
	if s.run.lookupRes != nil {
		s.run.lookupRes.Cancel()
		s.run.lookupRes = nil
	}
	s.dq.latest, s.dq.hasLatest = nil, false
	s.hold.since = time.Time{}
	s.setStateLocked(StateStopped, cause)
	s.unlock()
	return true
}

// registryClosed stops the subscription with err (the ConnectionMonitor's
// ErrRegistryClosed) if it waits with no attempt scheduled or in flight:
// subscribed, or awaiting a ReconnectConfirmer's evidence. Such a
// subscription would never learn that the registry is closed. One with an
// attempt to come learns it from that attempt, like any other permanent
// error (so its attempts are counted the same way whatever the timing).
func (s *Subscription) registryClosed(err error) {
	s.mu.Lock()
	waiting := !s.stopped && (s.run.phase == phaseAwaiting || (s.run.phase == phaseIdle && s.run.acked))
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
	called, stopAfter, cause := s.run.called, s.stopAfter, s.stopErr
	s.unlock()
	if stopAfter != nil {
		stopAfter()
	}
	var err error
	if called {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), UnsubscribeTimeout)
		err = s.unsubscribe(ctx)
		cancel()
		switch {
		case errors.Is(err, ErrRegistryClosed):
			// A closed registry client holds no subscription any more.
			s.m.log.Debug("registry unsubscribe: registry closed", zap.Stringer("key", s.key), zap.Error(err))
		case err != nil:
			s.m.log.Warn("registry unsubscribe failed", zap.Stringer("key", s.key), zap.Error(err))
		}
	}
	switch {
	case errors.Is(cause, ErrUnsubscribed), errors.Is(cause, ErrManagerClosed):
		s.m.log.Debug("subscription stopped", zap.Stringer("key", s.key), zap.Error(cause))
	default:
		s.m.log.Info("subscription stopped", zap.Stringer("key", s.key), zap.Error(cause))
	}
	s.m.retire(s)
	close(s.done)
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
	noteLocked(s, StateChange{Key: s.key, ID: s.id, From: from, To: st, Reason: reason, At: now})
}

// settledLocked is the state of a confirmed subscription.
func (s *Subscription) settledLocked() State {
	if !s.hold.since.IsZero() {
		return StateHeld
	}
	return StateSubscribed
}

// --- retry-run control ---

// scheduleLocked schedules the next attempt at at; with token, it takes a
// limiter token first.
func (s *Subscription) scheduleLocked(at time.Time, token bool) {
	s.run.phase = phaseScheduled
	s.run.needToken = token && s.m.opts.limiter != nil
	s.run.tokenHeld = false
	s.run.retry, s.run.withdrawn, s.run.allowed = false, false, false
	s.m.sched.set(s.timer(timerRetry), at)
}

// launchLocked starts an attempt: in a goroutine of its own when queued
// is false (the first attempt, from Subscribe), on the scheduler's runners
// otherwise.
func (s *Subscription) launchLocked(queued bool) {
	if b := s.m.opts.budget; b != nil && !s.run.retry {
		b.Deposit(time.Now()) // a first attempt of a confirmation (WithBudget)
	}
	s.run.deferWhy = nil
	s.run.phase = phaseInFlight
	s.run.needToken = false
	s.run.attempts++
	s.run.total++
	s.run.called = true
	ctx, cancel := context.WithCancel(s.parent)
	s.run.cancel = cancel
	s.calls.Add(1)
	s.m.wg.Add(1)
	if queued {
		s.m.sched.enqueue(job{s: s, ctx: ctx, n: s.run.attempts})
		return
	}
	go s.attempt(ctx, s.run.attempts)
}

// scheduleFor returns the subscription's rebound.Schedule, creating it
// (a new run at now) if needed. The caller holds s.mu.
func (s *Subscription) scheduleFor(now time.Time) *rebound.Schedule {
	if s.run.sch == nil {
		s.run.sch = s.m.retrier.NewSchedule(now)
	}
	return s.run.sch
}

// newRunLocked starts a new run of the subscription's Schedule at now (a
// disruption: the delay sequence from its first step). The caller holds
// s.mu and has made sure no limiter token is held (or wants it given back).
func (s *Subscription) newRunLocked(now time.Time) *rebound.Schedule {
	sch := s.scheduleFor(now)
	sch.Reset(now)
	s.run.tokenHeld = false
	return sch
}

// attempt is one Registry.Subscribe call.
func (s *Subscription) attempt(ctx context.Context, n int) {
	defer s.m.wg.Done()
	err := ctx.Err() // cancelled while queued: the subscription stopped or reconnected
	if err == nil {
		err = s.callSubscribe(ctx)
	}
	permanent := err != nil && (errors.Is(err, ErrRegistryClosed) || rebound.IsPermanent(err))

	s.mu.Lock()
	s.run.cancel()
	s.run.cancel = nil
	var (
		delay time.Duration
		acked bool
	)
	switch {
	case s.stopped:
		err = nil // not worth a log line: the subscription is stopping
	case err == nil:
		if !s.run.acked {
			s.run.acked = true
			close(s.ready)
		}
		s.lastErr = nil
		if s.run.again {
			s.run.again = false
			now := time.Now()
			s.scheduleFor(now).Succeeded(now) // the token was used; the next attempt is a new run
			s.scheduleLocked(now, true)
		} else {
			acked = true
			s.ackLocked("subscribe", false)
		}
	case permanent:
		s.lastErr = err
	case s.run.again && ctx.Err() != nil && s.parent.Err() == nil:
		// Cancelled by a reconnect: not a failure of the registry, just
		// a new attempt (lastErr keeps the disruption's reason).
		s.run.again = false
		err = nil
		s.scheduleLocked(time.Now(), true)
	default:
		s.lastErr = err
		s.run.refresh = false
		if s.state != StateRetrying {
			s.setStateLocked(StateRetrying, err)
		}
		now := time.Now()
		if s.run.again {
			s.run.again = false
			s.scheduleLocked(now, true)
			break
		}
		d, stop := s.scheduleFor(now).Next(err, now)
		if stop != nil {
			// Not retryable after all (a classifier): stop like a
			// permanent error.
			permanent, err = true, stop
			break
		}
		delay = d
		s.scheduleLocked(now.Add(delay), true)
		s.run.retry = true
	}
	stopped := s.stopped
	// The attempt's outcome as events: EventAttempt, then EventRetry or
	// EventGiveUp for a failure; observed by the subscription's retry log
	// and by the Manager's observers.
	var end rebound.Event
	switch {
	case stopped:
	case acked:
	case permanent:
		end = rebound.Event{Kind: rebound.EventGiveUp, Attempt: n, Err: err}
	case err != nil:
		end = rebound.Event{Kind: rebound.EventRetry, Attempt: n, Err: err, Delay: delay}
	}
	if !stopped && s.m.observed() {
		sa := SubscribeAttempt{Key: s.key, ID: s.id, Attempt: n, Err: err, Delay: delay, At: time.Now()}
		noteLocked(s, sa)
		if end.Kind != 0 {
			e := end
			e.Detail = sa
			s.outbox = append(s.outbox, e)
		}
	}
	lg := s.loopLocked()
	s.unlock()
	s.calls.Done()

	if stopped {
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

func (s *Subscription) callSubscribe(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("subscriber: Registry.Subscribe(%s) panicked: %v", s.key, r)
		}
	}()
	return s.m.reg.Subscribe(ctx, s.key, &s.sink)
}

// ackLocked records a confirmation: the subscription is subscribed. reason
// is "subscribe" for an acknowledged Registry.Subscribe (evidence false),
// or the adapter's words for its Sink.Confirmed (evidence true).
func (s *Subscription) ackLocked(reason string, evidence bool) {
	now := time.Now()
	s.run.phase = phaseIdle
	s.run.needToken, s.run.tokenHeld = false, false
	if t := s.m.opts.throttle; t != nil && !evidence {
		t.Accepted(now) // an answered request (WithThrottle)
	}
	if s.run.sch == nil && !evidence && s.m.metrics != nil {
		// A first attempt that succeeded ran without a Schedule: report
		// it to the retry metrics like any other attempt.
		s.scheduleFor(now)
	}
	if s.run.sch != nil {
		// Not Cancel: a token Admit reserved was used by the attempt that
		// succeeded (at the same instant, Cancel would give it back).
		s.run.sch.Succeeded(now)
		s.run.sch = nil // a new run starts with the next disruption
	}
	s.lastErr = nil
	if !s.run.acked {
		s.run.acked = true
		close(s.ready)
	}
	if s.hold.window && s.hold.windowEnd.IsZero() {
		s.hold.windowEnd = now.Add(s.m.opts.hold)
	}
	s.setStateLocked(s.settledLocked(), nil)
	if reason != "" {
		noteLocked(s, Confirmation{Key: s.key, ID: s.id, Reason: reason, At: now, evidence: evidence})
	}
	s.scheduleReconcileLocked(now)
	if s.dq.hasLatest {
		s.kickLocked()
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
		s.fireRetryLocked(now)
	case timerConfirm:
		if s.run.phase != phaseAwaiting {
			return
		}
		s.m.log.Info("no confirmation from the registry adapter; confirming", zap.Stringer("key", s.key))
		s.lastErr = ErrNotConfirmed
		s.scheduleLocked(now, true)
	case timerHold:
		if at := s.holdCheckAtLocked(s.hold.untilLocked(s.m.opts.hold)); !at.IsZero() && !now.Before(at) {
			s.hold.checks++
			// Ask the server, unless a Lookup is already on its way.
			if !s.run.lookupBusy && !s.run.lookupRefresh && s.run.lookupRes == nil {
				s.m.sched.set(s.timer(timerReconcile), now)
			}
		}
		s.kickLocked() // delivers the list if the hold is over, or sets the next timer
	case timerReconcile:
		s.fireLookupLocked(now)
	}
}

func (s *Subscription) fireRetryLocked(now time.Time) {
	if s.run.phase != phaseScheduled {
		return
	}
	if s.run.retry && !s.admitRetryLocked(now) {
		return
	}
	if s.run.needToken {
		// The token is taken when the attempt is due, not when it was
		// scheduled (in time order, see rebound.Schedule.Admit); Admit
		// called again returns the time left on the token it holds.
		if w, _ := s.scheduleFor(now).Admit(now); w > 0 {
			s.run.tokenHeld = true
			s.m.sched.set(s.timer(timerRetry), now.Add(w))
			return
		}
	}
	s.run.tokenHeld = false
	s.launchLocked(true)
}

// admitRetryLocked asks the budget (WithBudget), then the throttle
// (WithThrottle), for the retry due at now, once each per retry. A refusal
// defers the retry to the next backoff step (rebound.Schedule.Refuse; a
// subscription never gives up: its policy has no MaxAttempts, so Refuse
// never stops) and admitRetryLocked returns false.
func (s *Subscription) admitRetryLocked(now time.Time) bool {
	var why error
	switch b, t := s.m.opts.budget, s.m.opts.throttle; {
	case b != nil && !s.run.withdrawn && !b.TryWithdraw(now):
		why = rebound.ErrBudgetExhausted
	case t != nil && !s.run.allowed && !t.Allow(now):
		s.run.withdrawn = b != nil // not charged again for this retry
		why = rebound.ErrThrottled
	default:
		s.run.withdrawn, s.run.allowed = b != nil, t != nil
		return true
	}
	d, _ := s.scheduleFor(now).Refuse(why, now)
	s.m.sched.set(s.timer(timerRetry), now.Add(d))
	s.deferredLocked(now, d, why)
	return false
}

// deferredLocked records an attempt due at now that was not sent (why:
// rebound.ErrThrottled or rebound.ErrBudgetExhausted), asked again after
// d; the caller has scheduled it.
func (s *Subscription) deferredLocked(now time.Time, d time.Duration, why error) {
	s.run.tokenHeld = false
	s.run.deferred++
	s.run.deferWhy = why
	noteLocked(s, Deferral{Key: s.key, ID: s.id, Reason: why, Delay: d, At: now})
}

// disruptKind says why a subscription must be confirmed again.
type disruptKind uint8

const (
	disruptLost        disruptKind = iota // ConnectionMonitor: Disconnected
	disruptReconnected                    // ConnectionMonitor: Connected
	disruptResubscribe                    // Sink.Resubscribe, or a reconciliation found a difference
)

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
	if kind != disruptResubscribe {
		// Only a real disconnection or restart opens the empty-list hold.
		s.hold.window, s.hold.windowEnd = true, time.Time{}
		if kind == disruptLost {
			s.hold.why = "registry connection lost"
		} else {
			s.hold.why = "registry reconnected"
		}
	}
	if reason != nil {
		s.lastErr = reason
	}
	confirms := s.m.confirms
	switch s.run.phase {
	case phaseIdle:
		if !s.run.acked {
			return
		}
		s.run.attempts = 0
		s.setStateLocked(StateRetrying, reason)
		switch {
		case kind == disruptLost && confirms:
			s.awaitLocked(time.Time{})
		case kind == disruptLost:
			// A lost connection is not worth an attempt at once (it would
			// fail): the first comes after a jittered delay.
			s.scheduleLocked(now.Add(s.newRunLocked(now).FirstDelay()), true)
		case kind == disruptReconnected && confirms:
			s.awaitLocked(now.Add(s.m.opts.confirmCap))
		default:
			s.newRunLocked(now)
			s.scheduleLocked(now, true)
		}
	case phaseAwaiting:
		switch kind {
		case disruptLost:
			s.awaitLocked(time.Time{})
		case disruptReconnected:
			s.awaitLocked(now.Add(s.m.opts.confirmCap))
		default:
			s.cancelTimer(timerConfirm)
			s.newRunLocked(now)
			s.scheduleLocked(now, true)
		}
	case phaseScheduled:
		if s.run.refresh {
			s.run.refresh = false
			s.run.attempts = 0
			s.setStateLocked(StateRetrying, reason)
		}
		if kind == disruptLost {
			return // keep the current backoff
		}
		if !s.run.tokenHeld {
			// Cut the wait short: a new run, at once (through the
			// limiter). A run queued at the limiter keeps its place: a
			// cancelled reservation cannot always return its token.
			s.newRunLocked(now)
			s.scheduleLocked(now, true)
		}
	case phaseInFlight:
		if s.run.refresh {
			s.run.refresh = false
			s.setStateLocked(StateRetrying, reason)
		}
		if kind == disruptLost {
			return
		}
		s.run.again = true
		if kind == disruptReconnected && s.run.cancel != nil {
			s.run.cancel() // its connection is gone
		}
	}
}

// awaitLocked waits for a ReconnectConfirmer's evidence until deadline
// (zero: no deadline, the connection is down).
func (s *Subscription) awaitLocked(deadline time.Time) {
	s.run.phase = phaseAwaiting
	s.confDL = deadline
	if deadline.IsZero() {
		s.cancelTimer(timerConfirm)
		return
	}
	s.m.sched.set(s.timer(timerConfirm), deadline)
}

// confirmed is Sink.Confirmed.
func (s *Subscription) confirmed(reason string) {
	s.mu.Lock()
	defer s.unlock()
	if s.stopped {
		return
	}
	now := time.Now()
	s.confAt, s.confWhy = now, reason
	switch {
	case s.run.phase == phaseAwaiting:
		s.cancelTimer(timerConfirm)
		s.ackLocked(reason, true)
		return
	case s.run.phase == phaseScheduled && s.run.refresh:
		// A Refresh not sent yet: the evidence answers it.
		s.cancelTimer(timerRetry)
		if s.run.sch != nil && s.run.tokenHeld {
			s.run.sch.Cancel(now)
		}
		s.run.tokenHeld = false
		s.run.refresh = false
		s.run.phase = phaseIdle
	}
	if s.run.lookupRefresh && !s.run.lookupBusy {
		s.run.lookupRefresh = false
		if s.run.lookupRes != nil {
			s.run.lookupRes.Cancel()
			s.run.lookupRes = nil
		}
		s.cancelTimer(timerReconcile)
		s.scheduleReconcileLocked(now)
	}
	noteLocked(s, Confirmation{Key: s.key, ID: s.id, Reason: reason, At: now, evidence: true})
}

// --- reconciliation ---

// scheduleReconcileLocked schedules the next periodic Lookup, jittered
// uniformly in [0.75, 1.25] of the period.
func (s *Subscription) scheduleReconcileLocked(now time.Time) {
	p := s.m.opts.reconcile
	if s.m.recon == nil || p <= 0 || s.run.lookupBusy || s.run.lookupRefresh || s.m.noLookup.Load() {
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
	s.m.sched.set(s.timer(timerReconcile), now.Add(d))
}

func (s *Subscription) fireLookupLocked(now time.Time) {
	if s.run.phase != phaseIdle || s.run.lookupBusy {
		// Not subscribed: the next acknowledgement schedules it again.
		s.run.lookupRefresh = false
		return
	}
	if lim := s.m.opts.limiter; lim != nil && s.run.lookupRes == nil {
		if r := lim.ReserveN(now, 1); r.OK() {
			if d := r.DelayFrom(now); d > 0 {
				s.run.lookupRes = r
				s.m.sched.set(s.timer(timerReconcile), now.Add(d))
				return
			}
		}
	}
	s.run.lookupRes = nil
	s.run.lookupBusy = true
	refresh := s.run.lookupRefresh
	s.run.lookupRefresh = false
	s.run.lookupCtx, s.run.lookupCancel = context.WithTimeout(s.parent, UnsubscribeTimeout)
	s.calls.Add(1)
	s.m.wg.Add(1)
	go s.lookup(s.dq.seq, refresh)
}

// lookup is one Reconciler.Lookup call; seq is the number of lists
// received when it started.
func (s *Subscription) lookup(seq uint64, refresh bool) {
	defer s.m.wg.Done()
	s.mu.Lock()
	ctx := s.run.lookupCtx
	s.unlock()
	list, err := s.callLookup(ctx)
	if err == nil {
		sortInstances(list)
	}
	s.mu.Lock()
	s.run.lookupBusy = false
	s.run.lookupCancel()
	s.run.lookupCtx, s.run.lookupCancel = nil, nil
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
		if refresh && s.run.phase == phaseIdle {
			// The read failed: confirm by resubscribing, paced.
			s.run.refresh = true
			s.scheduleLocked(now, true)
		}
	case s.dq.seq != seq:
		// A push arrived meanwhile: it is at least as new as the read.
		s.pushDeliveryLocked(Stale, len(list), now)
	default:
		cur, ok := s.dq.latest, s.dq.hasLatest
		if !ok {
			cur, ok = s.dq.last, s.dq.hasLast
		}
		if ok && !sameInstances(cur, list) {
			repair = true
			heldEmpty = !s.hold.since.IsZero()
			s.receiveLocked(list, now)
			s.disruptLocked(disruptResubscribe, ErrOutOfSync, now)
		}
	}
	if !s.stopped && s.run.phase == phaseIdle {
		s.scheduleReconcileLocked(now)
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

func (s *Subscription) callLookup(ctx context.Context) (list []Instance, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("subscriber: Reconciler.Lookup(%s) panicked: %v", s.key, r)
		}
	}()
	return s.m.recon.Lookup(ctx, s.key)
}

// --- delivery queue and empty-list hold ---

// update is Sink.Update.
func (s *Subscription) update(list []Instance) {
	sortInstances(list)
	s.mu.Lock()
	defer s.unlock()
	if s.stopped {
		return
	}
	s.receiveLocked(list, time.Now())
}

func (s *Subscription) receiveLocked(list []Instance, now time.Time) {
	if s.dq.hasLatest {
		s.pushDeliveryLocked(Stale, len(s.dq.latest), now)
	}
	s.dq.latest, s.dq.hasLatest = list, true
	s.dq.seq++
	if len(list) > 0 && !s.hold.since.IsZero() {
		s.endHoldLocked()
	}
	s.kickLocked()
}

func (s *Subscription) endHoldLocked() {
	s.hold.since, s.hold.first, s.hold.checks = time.Time{}, false, 0
	s.cancelTimer(timerHold)
	if s.state == StateHeld {
		s.setStateLocked(StateSubscribed, nil)
	}
}

// untilLocked is when the current hold ends at the latest: hold after the
// empty list arrived (the hard cap), or the end of the window if sooner.
func (h *emptyHold) untilLocked(hold time.Duration) time.Time {
	until := h.since.Add(hold)
	if !h.windowEnd.IsZero() && h.windowEnd.Before(until) {
		until = h.windowEnd
	}
	return until
}

func (s *Subscription) pushDeliveryLocked(r DeliveryResult, n int, now time.Time) {
	noteLocked(s, Delivery{Key: s.key, ID: s.id, Result: r, Instances: n, At: now})
}

func (s *Subscription) kickLocked() {
	if s.dq.delivering || s.stopped || !s.dq.hasLatest {
		return
	}
	s.dq.delivering = true
	s.m.wg.Add(1)
	go s.deliverLoop()
}

// deliverLoop is the delivery goroutine: it calls the listener with the
// latest list until there is nothing left to deliver now.
func (s *Subscription) deliverLoop() {
	defer s.m.wg.Done()
	defer s.m.enterCallback()()
	for {
		s.mu.Lock()
		now := time.Now()
		list, ok := s.nextLocked(now)
		if !ok {
			s.dq.delivering = false
			s.unlock()
			return
		}
		s.dq.deliveries++
		s.dq.lastAt = now
		s.unlock()
		s.call(list)
	}
}

// nextLocked decides what to deliver now: a list (ok), or nothing (a
// held-back empty list has its timer set).
func (s *Subscription) nextLocked(now time.Time) (list []Instance, ok bool) {
	if s.stopped || !s.dq.hasLatest {
		return nil, false
	}
	if s.dq.hasLast && sameInstances(s.dq.latest, s.dq.last) {
		s.pushDeliveryLocked(Duplicate, len(s.dq.latest), now)
		s.dq.latest, s.dq.hasLatest = nil, false
		return nil, false
	}
	hold := s.m.opts.hold
	// An empty list is held in the window if it would replace a non-empty
	// one, or if it is the subscription's first list.
	if len(s.dq.latest) == 0 && (len(s.dq.last) > 0 || !s.dq.hasLast) && hold > 0 && s.hold.window {
		h := &s.hold
		if !h.windowEnd.IsZero() && !now.Before(h.windowEnd) {
			h.window = false // the window is over
		} else {
			if h.since.IsZero() {
				h.since = now
				h.first = !s.dq.hasLast
				s.pushDeliveryLocked(EmptyHeld, 0, now)
				if s.state == StateSubscribed {
					s.setStateLocked(StateHeld, nil)
				}
			}
			if until := h.untilLocked(hold); now.Before(until) {
				at := until
				if c := s.holdCheckAtLocked(until); !c.IsZero() && c.Before(at) {
					at = c
				}
				s.m.sched.set(s.timer(timerHold), at)
				return nil, false
			}
		}
	}
	list = s.dq.latest
	s.dq.latest, s.dq.hasLatest = nil, false
	s.dq.last, s.dq.hasLast = list, true
	if !s.hold.since.IsZero() {
		s.endHoldLocked()
	}
	s.pushDeliveryLocked(Delivered, len(list), now)
	return list, true
}

// call runs the listener, recovering a panic.
func (s *Subscription) call(list []Instance) {
	defer func() {
		if r := recover(); r != nil {
			s.m.log.Error("listener panicked", zap.Stringer("key", s.key),
				zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	s.listener(list)
}
