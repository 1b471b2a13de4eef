package subscriber

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/logging"
)

// State is the state of a subscription.
type State int

const (
	// StatePending: the registry has not acknowledged the subscription
	// yet and no attempt has failed (the first attempt is in flight).
	StatePending State = iota + 1
	// StateSubscribed: the registry acknowledged the subscription and the
	// Manager knows of no reason to doubt it.
	StateSubscribed
	// StateRetrying: an attempt failed, or the subscription was disrupted
	// (connection lost or re-established, Sink.Resubscribe, a
	// reconciliation found a difference), and the Manager is confirming it
	// again (or waiting for a ReconnectConfirmer's evidence, see
	// Status.ConfirmDeadline). Listeners keep the last list.
	StateRetrying
	// StateHeld: subscribed, but an empty list that arrived after a
	// registry disconnection or restart is held back and the listener keeps
	// the last non-empty list, or has no list yet if the held list is the
	// first (see WithEmptyListHold and Status.HeldSince).
	StateHeld
	// StateStopped: the subscription ended for good (Unsubscribe, its
	// context, Close, or a permanent registry error); see
	// Subscription.Err and Status.LastErr.
	StateStopped
)

// numStates bounds the State values (for per-state counters).
const numStates = int(StateStopped) + 1

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateSubscribed:
		return "subscribed"
	case StateRetrying:
		return "retrying"
	case StateHeld:
		return "held"
	case StateStopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Status is a snapshot of one subscription.
type Status struct {
	// ID identifies the subscription within its Manager; IDs grow in the
	// order subscriptions were created.
	ID    uint64
	Key   Key
	State State
	// Since is when the subscription entered State.
	Since time.Time
	// Attempts counts the Registry.Subscribe calls of the current (or, when
	// subscribed, the last) confirmation: since the subscription started
	// or was last disrupted.
	Attempts int
	// TotalAttempts counts every Registry.Subscribe call of the
	// subscription.
	TotalAttempts int
	// LastErr is the error of the last failed attempt (or ErrDisconnected,
	// errNotConfirmed, errOutOfSync, or the error given to
	// Sink.Resubscribe) while not subscribed; nil once confirmed. For a
	// stopped subscription it is the reason it stopped.
	LastErr error
	// Instances is the length of the list last delivered to the listener.
	Instances int
	// Deliveries counts the listener calls, and LastDelivery is when the
	// last one started (zero before the first).
	Deliveries   int
	LastDelivery time.Time
	// ConfirmedAt is when the adapter last reported evidence that the
	// registry holds the subscription (Sink.Confirmed), and ConfirmReason
	// the evidence it named; zero and empty if it never did.
	ConfirmedAt   time.Time
	ConfirmReason string
	// ConfirmDeadline is set while the Manager waits for a
	// ReconnectConfirmer's evidence after a reconnect: when the safety cap
	// (WithConfirmTimeout) ends the wait. Zero otherwise (also while the
	// connection is down).
	ConfirmDeadline time.Time
	// HeldSince is set while an empty list is held back (see
	// WithEmptyListHold): when it arrived. HeldUntil is when it will be
	// delivered at the latest, unless a non-empty list replaces it first;
	// HeldReason says which registry event opened the hold.
	HeldSince  time.Time
	HeldUntil  time.Time
	HeldReason string
	// Deferred counts the attempts of the subscription that were due but
	// not sent, deferred locally by the throttle (WithThrottle) or the
	// retry budget (WithBudget) to the next backoff step. DeferReason is
	// why the last due attempt was deferred (rebound.ErrThrottled or
	// rebound.ErrBudgetExhausted; rebound.ErrExhausted, wrapped, for a
	// shared limiter whose burst was set to 0: it can grant no token);
	// nil once an attempt is sent.
	Deferred    int
	DeferReason error
}

// Counts are cheap aggregate figures of a Manager, for gauges (package
// obs): reading them takes no subscription's lock.
type Counts struct {
	// ByState counts the subscriptions in each state; ByState[StateStopped]
	// counts the stopped ones still retained in Status (the last 100).
	// Index it with a State.
	ByState [numStates]int
	// Stopped counts every subscription that has stopped since New.
	Stopped uint64
	// Scheduled is the number of due times in the Manager's scheduler
	// (retries, token waits, confirmation caps, holds, reconciliations).
	Scheduled int
	// Connection is the last state the ConnectionMonitor reported (0 if
	// none, or no monitor).
	Connection ConnState
}

// Manager keeps subscriptions to a service registry alive: each is retried
// until the registry acknowledges it, confirmed again after every
// reconnect, and its listener gets every change of its list in order.
// Create it with New; it is safe for concurrent use. Close stops every
// goroutine it starts and waits for them.
type Manager struct {
	reg       Registry
	opts      options
	log       *zap.Logger
	loopLog   *zap.Logger                             // log with the subscriber component, for the retry Loops
	logs      bool                                    // log enables some level: the subscriptions keep a retry Loop
	confirms  bool                                    // reg is a ReconnectConfirmer that confirms reconnects
	table     *[numRunStates][numRunEvents]transition // the retry control of the subscriptions (runtable.go)
	recon     Reconciler                              // nil unless reg implements it
	noLookup  atomic.Bool                             // recon answered with a permanent error: not used any more
	sched     *scheduler
	retrier   *rebound.Retrier      // the policy and the admission of every run but a subscription's first (admit.go)
	starter   *rebound.Retrier      // the same for a subscription's first run: its first attempt takes no token
	observers []rebound.Observer    // WithObserver, and the metrics (metrics.go)
	userObs   bool                  // WithObserver gave some
	metrics   *telemetry.Subscriber // nil without WithMeterProvider (metrics.go)

	ctx    context.Context // cancelled by Close: stops the monitor and the scheduler
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the Manager

	states   [numStates]atomic.Int64
	nStopped atomic.Uint64
	conn     atomic.Int32
	parking  atomic.Bool   // the monitor's last report was Disconnected and it still runs: retries wait for Connected (park.go)
	upSeen   atomic.Bool   // the connection was up once: a Connected report, or a confirmation (park.go)
	inCB     callbackMarks // goroutines running listener or observer calls

	mu      sync.Mutex
	closed  bool
	nextID  uint64
	upAt    time.Time // the last Connected report (zero: none)
	down    bool      // the last report was Disconnected
	subs    map[uint64]*Subscription
	retired []Status // stopped subscriptions, oldest first, at most opts.keepStopped

	watches watchSet // the shared views (watch.go)

	closing atomic.Bool   // Close or Shutdown has begun (startClose runs once)
	allDone chan struct{} // closed when Close has finished
}

// New returns a Manager subscribing through reg; Close stops the
// goroutines it starts. Each option's doc states its default.
// A nil reg or a bad option is an *rebound.ArgumentError; nil options are
// ignored.
func New(reg Registry, opts ...Option) (*Manager, error) {
	if reg == nil {
		return nil, argError("subscriber.New", "reg", "is nil")
	}
	if nilness.Is(reg) {
		return nil, argError("subscriber.New", "reg", "is a nil pointer")
	}
	o := options{hold: defaultEmptyListHold, confirmCap: defaultConfirmTimeout, refreshMin: defaultRefreshInterval,
		keepStopped: defaultStoppedRetention}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	if !o.limiterSet {
		o.limiter = newDefaultLimiter()
	}
	retrier, starter, err := o.retriers()
	if err != nil {
		return nil, err // an *rebound.ArgumentError naming WithPolicy's bad option
	}
	log := logging.Redacted(o.log) // nil: zap.NewNop()
	m := &Manager{
		retrier: retrier,
		starter: starter,
		reg:     reg,
		opts:    o,
		log:     log.With(zap.String("component", "subscriber")),
		subs:    make(map[uint64]*Subscription),
		allDone: make(chan struct{}),
		table:   tableFor(false),
	}
	m.loopLog = m.log
	// A logger that writes nothing needs no retry Loop per subscription.
	m.logs = zapcore.LevelOf(m.log.Core()) != zapcore.InvalidLevel
	m.reg = &watchedRegistry{Registry: reg, ws: &m.watches} // reports attempts to the views
	if rc, ok := reg.(Reconciler); ok {
		m.recon = rc
	}
	if err := m.startMetrics(&o); err != nil {
		return nil, fmt.Errorf("subscriber.New: WithMeterProvider: %w", err)
	}
	m.observers = append(m.observers, o.observers...)
	m.userObs = len(o.observers) > 0
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.sched = newScheduler(&m.wg, m.ctx.Done())
	m.sched.start()
	if mon, ok := reg.(ConnectionMonitor); ok {
		if rc, ok := reg.(ReconnectConfirmer); ok {
			m.confirms = rc.ConfirmsReconnects()
			m.table = tableFor(m.confirms)
		}
		m.wg.Add(1)
		go m.monitor(mon)
	}
	return m, nil
}

// Subscribe starts a subscription of l to key and returns at once; Ready
// is closed when the registry acknowledges it. Failed attempts are
// retried with the policy's backoff, whatever the transient error. ctx
// bounds the subscription's life, not just the call: when ctx is done the
// subscription stops with context.Cause(ctx). A nil ctx or l, or a bad key,
// is a *rebound.ArgumentError; after Close the error wraps ErrManagerClosed.
func (m *Manager) Subscribe(ctx context.Context, key Key, l Listener) (*Subscription, error) {
	return m.subscribe(ctx, key, l, nil)
}

// subscribe is Subscribe; before, if not nil, is called with the new
// subscription before its first attempt starts (Watch: so that the
// attempt's outcome reaches the view).
func (m *Manager) subscribe(ctx context.Context, key Key, l Listener, before func(*Subscription)) (*Subscription, error) {
	const fn = "subscriber.Manager.Subscribe"
	if ctx == nil {
		return nil, argError(fn, "ctx", "is nil")
	}
	if strings.TrimSpace(key.Service) == "" {
		return nil, argError(fn, "key.Service", "is empty or only white space")
	}
	for i, c := range key.Clusters {
		if strings.TrimSpace(c) == "" {
			return nil, argError(fn, fmt.Sprintf("key.Clusters[%d]", i), "is empty or only white space")
		}
	}
	if l == nil {
		return nil, argError(fn, "l", "is nil (a Listener is required)")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscriber: Subscribe %s: %w", key, context.Cause(ctx))
	}
	key.Clusters = slices.Clone(key.Clusters)
	s := newSubscription(m, ctx, key, l)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("subscriber: Subscribe %s: %w", key, ErrManagerClosed)
	}
	m.nextID++
	s.id = m.nextID
	m.subs[s.id] = s
	s.hold.openFirst(m.opts.hold, m.down, m.upAt)
	m.mu.Unlock()

	if before != nil {
		before(s)
	}
	s.start()
	return s, nil
}

// Status returns a snapshot of every subscription: the running ones and
// the last 100 stopped ones, in
// the order they were created.
func (m *Manager) Status() []Status {
	subs := m.snapshot()
	m.mu.Lock()
	out := make([]Status, 0, len(subs)+len(m.retired))
	out = append(out, m.retired...)
	m.mu.Unlock()
	for _, s := range subs {
		out = append(out, s.Status())
	}
	slices.SortStableFunc(out, func(a, b Status) int { return cmp.Compare(a.ID, b.ID) })
	// A subscription retired between the two reads appears twice: keep
	// its stopped entry.
	return slices.CompactFunc(out, func(a, b Status) bool { return a.ID == b.ID })
}

// Counts returns aggregate figures without locking any subscription.
func (m *Manager) Counts() Counts {
	var c Counts
	for i := range c.ByState {
		c.ByState[i] = int(m.states[i].Load())
	}
	m.mu.Lock()
	c.ByState[StateStopped] = len(m.retired)
	m.mu.Unlock()
	c.Stopped = m.nStopped.Load()
	c.Scheduled = m.sched.len()
	c.Connection = ConnState(m.conn.Load())
	return c
}

func (m *Manager) countState(from, to State) {
	if from > 0 && int(from) < numStates {
		m.states[from].Add(-1)
	}
	if to > 0 && int(to) < numStates {
		m.states[to].Add(1)
	}
}

// Close stops every subscription (calling Registry.Unsubscribe, bounded by
// 10 s each) and waits for every goroutine of the Manager, listener calls
// included. It is idempotent and returns nil; Subscribe then fails with
// ErrManagerClosed. Called from a listener or an observer, it starts closing
// and returns rebound.ErrCalledFromCallback at once.
func (m *Manager) Close() error {
	return m.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx: it starts closing the Manager (once)
// and waits until it is done or ctx is; in the latter case it returns an
// error wrapping ctx.Err() while the Manager finishes closing in the
// background (a later Close or Shutdown waits for it). Like Close, called
// from a listener or hook it returns rebound.ErrCalledFromCallback without
// waiting.
func (m *Manager) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return argError("subscriber.Manager.Shutdown", "ctx", "is nil")
	}
	if m.closing.CompareAndSwap(false, true) {
		m.startClose() // not a sync.Once: an observer of the stops it makes may call Close
	}
	if m.inCB.in() {
		return rebound.ErrCalledFromCallback
	}
	select {
	case <-m.allDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("subscriber: Shutdown: %w", ctx.Err())
	}
}

func (m *Manager) startClose() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	subs := m.snapshot()
	m.cancel()
	for _, s := range subs {
		if s.stop(ErrManagerClosed) {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				s.finish()
			}()
		}
	}
	// No goroutine can be added from here on: the Manager is closed and
	// every subscription is stopped.
	go func() {
		m.wg.Wait()
		// A subscription another caller stopped (Unsubscribe) is
		// finished by that caller: wait for it too, so that no
		// Registry.Unsubscribe of the Manager runs after Close.
		for _, s := range subs {
			<-s.Done()
		}
		_ = m.metrics.Close()
		close(m.allDone)
	}()
}

// closedNow reports whether Close or Shutdown has begun.
func (m *Manager) closedNow() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// track adds a goroutine to the Manager's WaitGroup unless it is closed.
func (m *Manager) track() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	return true
}

func (m *Manager) snapshot() []*Subscription {
	m.mu.Lock()
	subs := make([]*Subscription, 0, len(m.subs))
	for _, s := range m.subs {
		subs = append(subs, s)
	}
	m.mu.Unlock()
	slices.SortFunc(subs, func(a, b *Subscription) int { return cmp.Compare(a.id, b.id) })
	return subs
}

// retire moves a stopped subscription from the running ones to the
// retained stopped ones.
func (m *Manager) retire(s *Subscription) {
	st := s.Status()
	m.nStopped.Add(1)
	m.mu.Lock()
	delete(m.subs, s.id)
	if n := m.opts.keepStopped; n > 0 {
		if len(m.retired) >= n {
			copy(m.retired, m.retired[len(m.retired)-n+1:])
			m.retired = m.retired[:n-1]
		}
		m.retired = append(m.retired, st)
	}
	m.mu.Unlock()
	m.states[StateStopped].Add(-1) // the retained entries are counted in Counts
}

// onConnection handles a ConnectionMonitor report.
func (m *Manager) onConnection(st ConnState) {
	var (
		reason error
		kind   disruptKind
	)
	switch st {
	case Disconnected:
		reason, kind = ErrDisconnected, disruptLost
	case Connected:
		kind = disruptReconnected
	default:
		return
	}
	m.conn.Store(int32(st))
	if st == Connected {
		m.upSeen.Store(true)
	}
	m.parking.Store(st == Disconnected && m.upSeen.Load()) // before the snapshot: a subscription not in it sees it
	m.mu.Lock()
	m.down = st == Disconnected
	if st == Connected {
		m.upAt = time.Now()
	}
	m.mu.Unlock()
	subs := m.snapshot()
	m.log.Info("registry connection changed", zap.Stringer("state", st), zap.Int("subscriptions", len(subs)))
	if m.observed() {
		m.emit(event(ConnectionChange{State: st, Subscriptions: len(subs), At: time.Now()}))
	}
	for _, s := range subs {
		s.disrupt(kind, reason)
	}
	if st == Disconnected {
		m.watches.disconnected()
	}
}

// callbackMarks are the goroutines running listener or observer calls
// (Close from one of them returns rebound.ErrCalledFromCallback).
type callbackMarks struct{ ids sync.Map }

// enter marks the calling goroutine until the returned function is
// called. A goroutine already marked keeps its mark (an observer called
// from a listener's goroutine).
func (c *callbackMarks) enter() func() {
	id := goid.ID()
	if _, marked := c.ids.LoadOrStore(id, struct{}{}); marked {
		return func() {}
	}
	return func() { c.ids.Delete(id) }
}

// in reports whether the calling goroutine is marked.
func (c *callbackMarks) in() bool {
	_, ok := c.ids.Load(goid.ID())
	return ok
}
