package subscriber

import (
	"context"
	"errors"
	"fmt"
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
// Goroutines: while it is pending or retrying a subscription runs one retry
// goroutine; while a list is being delivered (or an empty list is held
// back, see WithEmptyListHold) it runs one delivery goroutine. An idle,
// subscribed subscription runs none.
type Subscription struct {
	m        *Manager
	id       uint64
	key      Key
	listener Listener
	parent   context.Context         // the ctx given to Subscribe
	ctx      context.Context         // child of parent, cancelled by stop
	cancel   context.CancelCauseFunc //
	sink     sink                    // the stable Sink handed to the Registry
	log      *logging.Loop
	ready    chan struct{} // closed on the first acknowledgement
	done     chan struct{} // closed when stopped and unsubscribed
	wake     chan struct{} // wakes a waiting delivery goroutine (cap 1)
	loopWG   sync.WaitGroup

	mu            sync.Mutex
	state         State
	since         time.Time
	attempts      int // of the current confirmation
	totalAttempts int
	lastErr       error
	stopped       bool
	stopErr       error
	acked         bool // ready is closed
	called        bool // Registry.Subscribe was called at least once
	stopAfter     func() bool

	// retry loop
	looping       bool               // the retry goroutine is running
	restart       bool               // a disruption asked it for a new run
	limited       bool               // the next run waits for the limiter first
	delayFirst    bool               // the next run waits a first backoff delay (connection lost)
	runNeedsToken bool               // the next attempt of the current run waits for the limiter
	awaitingToken bool               // an attempt is waiting for the limiter
	cancelRun     context.CancelFunc // cancels the current run

	// evidence-based confirmation (ReconnectConfirmer, Sink.Confirmed)
	awaiting      bool        // waiting for the adapter's Confirmed or Resubscribe
	awaitDeadline time.Time   // when the safety cap ends the wait (zero while disconnected)
	awaitTimer    *time.Timer // fires at awaitDeadline
	confirmedAt   time.Time
	confirmReason string
	lastRefresh   time.Time // when Refresh last started a re-confirmation

	// last-known-good
	disrupted  bool      // disrupted and not confirmed since
	churnUntil time.Time // empty lists are held back until then

	// delivery
	latest     []Instance // newest list received, not yet delivered
	hasLatest  bool
	last       []Instance // last list delivered
	hasLast    bool
	delivering bool // the delivery goroutine is running
	deliveries int
}

// sink is the Sink of one subscription.
type sink struct{ s *Subscription }

func (k *sink) Update(instances []Instance) { k.s.update(instances) }

func (k *sink) Resubscribe(err error) {
	if err == nil {
		err = errResubscribe
	}
	k.s.endAwait()
	k.s.disrupt(err, false)
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
		wake:     make(chan struct{}, 1),
		state:    StatePending,
		since:    time.Now(),
	}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.sink.s = s
	s.log = logging.NewLoop(m.opts.log, "subscriber", zap.Stringer("key", key))
	return s
}

func (s *Subscription) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopAfter = context.AfterFunc(s.parent, s.onCtxDone)
	s.startLoopLocked()
}

// Key returns the subscription's key.
func (s *Subscription) Key() Key {
	k := s.key
	k.Clusters = slices.Clone(k.Clusters)
	return k
}

// Ready returns a channel closed when the registry first acknowledges the
// subscription. The first list reaches the listener around the same time
// (adapters report it during or right after the acknowledgement). Ready
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
	defer s.mu.Unlock()
	return s.stopErr
}

// Status returns a snapshot of the subscription.
func (s *Subscription) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Key:           s.Key(),
		State:         s.state,
		Since:         s.since,
		Attempts:      s.attempts,
		TotalAttempts: s.totalAttempts,
		LastErr:       s.lastErr,
		Instances:     len(s.last),
		Deliveries:    s.deliveries,
		ConfirmedAt:   s.confirmedAt,
		ConfirmReason: s.confirmReason,
	}
	if s.awaiting {
		st.ConfirmDeadline = s.awaitDeadline
	}
	if s.stopped {
		st.LastErr = s.stopErr
	}
	return st
}

// Unsubscribe stops the subscription: its retry loop ends (and is waited
// for), no further list is delivered, and the registry's Unsubscribe is
// called (bounded by UnsubscribeTimeout); its error, if any, is returned.
// A listener call that had already started may still be running when
// Unsubscribe returns; Unsubscribe may be called from the listener itself.
// Calling Unsubscribe on a stopped subscription waits until it has finished
// stopping and returns nil.
func (s *Subscription) Unsubscribe() error {
	if !s.stop(ErrUnsubscribed) {
		<-s.done
		return nil
	}
	return s.finish()
}

// stop marks the subscription stopped; it returns false if it already was.
// The caller that gets true must call finish.
func (s *Subscription) stop(cause error) bool {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	s.stopped = true
	s.stopErr = cause
	s.setStateLocked(StateStopped)
	s.latest, s.hasLatest = nil, false
	s.awaiting = false
	if s.awaitTimer != nil {
		s.awaitTimer.Stop()
	}
	s.mu.Unlock()
	s.cancel(cause) // ends the current attempt or wait, wakes the delivery goroutine
	return true
}

// finish waits for the retry loop, unsubscribes from the registry and
// closes done. It runs once per subscription, after stop returned true.
func (s *Subscription) finish() error {
	s.loopWG.Wait()
	s.mu.Lock()
	called, stopAfter := s.called, s.stopAfter
	s.mu.Unlock()
	if stopAfter != nil {
		stopAfter()
	}
	var err error
	if called {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.parent), UnsubscribeTimeout)
		err = s.unsubscribe(ctx)
		cancel()
		if err != nil {
			s.m.log.Warn("registry unsubscribe failed", zap.Stringer("key", s.key), zap.Error(err))
		}
	}
	s.m.remove(s)
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

func (s *Subscription) setStateLocked(st State) {
	if s.state != st {
		s.state = st
		s.since = time.Now()
	}
}

// disrupt makes the subscription confirm itself again: the connection was
// lost (lost) or re-established, or the adapter asked to resubscribe. A
// running retry loop is restarted (its backoff wait is cut short), except
// for a lost connection (its attempts would fail anyway); every new run
// first waits for the shared limiter.
func (s *Subscription) disrupt(reason error, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.disrupted = true
	if reason != nil {
		s.lastErr = reason
	}
	if s.state == StateSubscribed {
		s.setStateLocked(StateRetrying)
		s.attempts = 0
	}
	if s.looping && lost {
		return // keep the current backoff
	}
	// A lost connection is not worth an attempt at once (it would fail):
	// the new run starts after a first jittered delay. A reconnect or the
	// adapter's request confirms at once (through the limiter; adapters
	// such as subscriber/nacos spread their Connected reports).
	s.delayFirst = lost
	if s.looping && s.awaitingToken {
		// The run is queued at the limiter and will make a fresh attempt
		// as soon as its token is due: cancelling it would give up its
		// place (a cancelled rate.Reservation cannot return its token once
		// later ones exist) and queue it again behind everyone else.
		return
	}
	s.limited = true
	if s.looping {
		s.restart = true
		if s.cancelRun != nil {
			s.cancelRun()
		}
		return
	}
	s.startLoopLocked()
}

func (s *Subscription) startLoopLocked() {
	if s.stopped || s.looping {
		return
	}
	s.looping = true
	s.loopWG.Add(1)
	s.m.wg.Add(1)
	go s.loop()
}

// loop is the retry goroutine.
func (s *Subscription) loop() {
	defer s.m.wg.Done()
	cause := s.runLoop()
	s.loopWG.Done()
	if cause != nil && s.stop(cause) {
		s.finish()
	}
}

// runLoop runs confirmation runs until one succeeds with no restart asked
// for, or the subscription must stop; it returns the reason to stop, or nil.
func (s *Subscription) runLoop() error {
	lim := s.m.opts.limiter
	for {
		s.mu.Lock()
		if s.stopped {
			s.looping = false
			s.mu.Unlock()
			return nil
		}
		// A limited run (after a disruption) takes a token before its
		// first attempt; every run takes one before each retry.
		s.runNeedsToken = s.limited && lim != nil
		s.limited, s.restart = false, false
		delayFirst := s.delayFirst
		s.delayFirst = false
		runCtx, cancel := context.WithCancel(s.ctx)
		s.cancelRun = cancel
		s.mu.Unlock()

		var err error
		if delayFirst {
			err = sleepCtx(runCtx, s.m.opts.policy.NewBackOff().NextBackOff())
		}
		if err == nil {
			err = rebound.Retry(runCtx, s.m.opts.policy, s.attempt, rebound.WithNotify(s.notify))
		}
		cancel()

		s.mu.Lock()
		s.cancelRun = nil
		switch {
		case s.stopped:
			s.looping = false
			s.mu.Unlock()
			return nil
		case s.restart:
			s.mu.Unlock()
			continue
		case err == nil:
			s.ackLocked()
			s.looping = false
			s.mu.Unlock()
			return nil
		case s.ctx.Err() != nil:
			// The Subscribe ctx is done: onCtxDone stops the subscription.
			s.looping = false
			s.mu.Unlock()
			return nil
		}
		s.looping = false
		attempts := s.attempts
		s.mu.Unlock()
		var re *rebound.RetryError
		if errors.As(err, &re) {
			// The policy is unlimited, so Retry stopped because the next
			// wait would end after the Subscribe ctx's deadline: the
			// subscription ends with that ctx.
			return re.Reason
		}
		s.log.GaveUp(attempts, err)
		return err
	}
}

// sleepCtx waits d, or until ctx is done (then it returns ctx.Err()).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitLimiter waits for a token of lim, or until ctx is done. Unlike
// rate.Limiter.Wait it does not fail early because of ctx's deadline.
func waitLimiter(ctx context.Context, lim *rate.Limiter) error {
	r := lim.Reserve()
	if !r.OK() {
		return nil // burst 0 with a finite rate: the limiter would never allow; do not block forever
	}
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// attempt is one Registry.Subscribe call, the operation of rebound.Retry.
//
// It first takes a token from the shared limiter when the run needs one (a
// retry, or the first attempt of a run started by a disruption). The
// Manager waits for the limiter here rather than through
// rebound.WithLimiter so that a disruption arriving while the subscription
// is queued for a token does not cancel its place in the queue (see
// disrupt).
func (s *Subscription) attempt(ctx context.Context) (err error) {
	if lim := s.m.opts.limiter; lim != nil {
		s.mu.Lock()
		need := s.runNeedsToken
		s.runNeedsToken = true // every later attempt of this run is a retry
		s.awaitingToken = need
		s.mu.Unlock()
		if need {
			werr := waitLimiter(ctx, lim)
			s.mu.Lock()
			s.awaitingToken = false
			s.mu.Unlock()
			if werr != nil {
				return werr
			}
		}
	}
	s.mu.Lock()
	s.attempts++
	s.totalAttempts++
	s.called = true
	s.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("subscriber: Registry.Subscribe(%s) panicked: %v", s.key, r)
		}
		if err == nil {
			return
		}
		s.mu.Lock()
		if !s.stopped && ctx.Err() == nil {
			s.lastErr = err
			s.setStateLocked(StateRetrying)
		}
		s.mu.Unlock()
		if errors.Is(err, ErrRegistryClosed) {
			err = rebound.Permanent(err)
		}
	}()
	return s.m.reg.Subscribe(ctx, s.key, &s.sink)
}

// notify passes retry events to the throttled log, numbering attempts
// across the runs of one confirmation. Give-ups are logged by runLoop
// (a cancelled run is no give-up).
func (s *Subscription) notify(e rebound.Event) {
	if e.Kind == rebound.EventGiveUp {
		return
	}
	s.mu.Lock()
	e.Attempt = s.attempts
	s.mu.Unlock()
	s.log.Notify(e)
}

// ackLocked records an acknowledgement.
func (s *Subscription) ackLocked() {
	now := time.Now()
	s.setStateLocked(StateSubscribed)
	s.lastErr = nil
	if s.disrupted {
		s.disrupted = false
		s.churnUntil = now.Add(s.m.opts.hold)
	}
	if !s.acked {
		s.acked = true
		close(s.ready)
	}
	if s.hasLatest {
		s.kickDeliveryLocked()
	}
}

// update is Sink.Update.
func (s *Subscription) update(list []Instance) {
	sortInstances(list)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.latest, s.hasLatest = list, true
	s.kickDeliveryLocked()
}

func (s *Subscription) kickDeliveryLocked() {
	if s.delivering {
		select {
		case s.wake <- struct{}{}:
		default:
		}
		return
	}
	if s.stopped || !s.hasLatest {
		return
	}
	s.delivering = true
	s.m.wg.Add(1)
	go s.deliverLoop()
}

// deliverLoop is the delivery goroutine: it calls the listener with the
// latest list until there is nothing left to deliver.
func (s *Subscription) deliverLoop() {
	defer s.m.wg.Done()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		list, ok, wait := s.nextLocked(time.Now())
		if !ok && wait <= 0 {
			s.delivering = false
			s.mu.Unlock()
			return
		}
		if ok {
			s.deliveries++
		}
		s.mu.Unlock()
		if ok {
			s.call(list)
			continue
		}
		// An empty list is held back until wait has passed.
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-s.wake:
		case <-timer.C:
		case <-s.ctx.Done():
		}
	}
}

// nextLocked decides what to deliver now: a list (ok), nothing but a
// held-back empty list to look at again after wait, or nothing.
func (s *Subscription) nextLocked(now time.Time) (list []Instance, ok bool, wait time.Duration) {
	if s.stopped || !s.hasLatest {
		return nil, false, 0
	}
	if s.hasLast && sameInstances(s.latest, s.last) {
		s.latest, s.hasLatest = nil, false
		return nil, false, 0
	}
	if len(s.latest) == 0 && len(s.last) > 0 && s.m.opts.hold > 0 {
		if s.disrupted {
			return nil, false, 0 // ackLocked starts delivery again
		}
		if now.Before(s.churnUntil) {
			return nil, false, s.churnUntil.Sub(now)
		}
	}
	list = s.latest
	s.latest, s.hasLatest = nil, false
	s.last, s.hasLast = list, true
	return list, true, 0
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

// errRefresh is the reason of a re-confirmation asked for by Refresh.
var errRefresh = errors.New("subscriber: refresh requested")

// awaitEvidence handles a connection report for a ReconnectConfirmer: a
// subscription that was subscribed (or already waiting) waits for the
// adapter's evidence instead of being confirmed by the Manager. It
// returns false when the subscription is not the adapter's to confirm
// (pending, retrying, stopped): the caller disrupts it as usual.
func (s *Subscription) awaitEvidence(st ConnState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.looping || (s.state != StateSubscribed && !s.awaiting) {
		return false
	}
	s.awaiting = true
	s.disrupted = true
	s.attempts = 0
	s.setStateLocked(StateRetrying)
	if s.awaitTimer != nil {
		s.awaitTimer.Stop()
	}
	if st == Disconnected {
		s.lastErr = ErrDisconnected
		s.awaitDeadline = time.Time{}
		return true
	}
	d := s.m.opts.confirmCap
	s.awaitDeadline = time.Now().Add(d)
	if s.awaitTimer == nil {
		s.awaitTimer = time.AfterFunc(d, s.confirmTimedOut)
	} else {
		s.awaitTimer.Reset(d)
	}
	return true
}

// confirmTimedOut is the safety cap: the adapter said nothing.
func (s *Subscription) confirmTimedOut() {
	s.mu.Lock()
	if s.stopped || !s.awaiting || s.awaitDeadline.IsZero() || time.Now().Before(s.awaitDeadline) {
		s.mu.Unlock()
		return
	}
	s.awaiting = false
	s.mu.Unlock()
	s.m.log.Info("no confirmation from the registry adapter; confirming", zap.Stringer("key", s.key))
	s.disrupt(ErrNotConfirmed, false)
}

// endAwait ends a wait for evidence (the adapter answered).
func (s *Subscription) endAwait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaiting = false
	if s.awaitTimer != nil {
		s.awaitTimer.Stop()
	}
}

// confirmed is Sink.Confirmed.
func (s *Subscription) confirmed(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.confirmedAt, s.confirmReason = time.Now(), reason
	if s.awaiting {
		s.awaiting = false
		if s.awaitTimer != nil {
			s.awaitTimer.Stop()
		}
		s.ackLocked()
	}
}

// Refresh asks for a paced re-confirmation of the subscription: the
// registry is asked again (Registry.Subscribe through the shared limiter)
// whether it holds the subscription. It returns at once. Calls are
// coalesced: a call does nothing while the subscription is pending,
// retrying, stopped or already re-confirming, or within
// WithRefreshInterval (default 5 s) of the last re-confirmation Refresh
// started, so that any number of calls costs at most one registry request
// per subscription per interval. The state stays subscribed unless the
// request fails. A gRPC resolver's ResolveNow calls it.
func (s *Subscription) Refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.stopped || s.looping || s.awaiting || s.state != StateSubscribed ||
		(!s.lastRefresh.IsZero() && now.Sub(s.lastRefresh) < s.m.opts.refreshMin) {
		return
	}
	s.lastRefresh = now
	s.limited = true
	s.startLoopLocked()
}
