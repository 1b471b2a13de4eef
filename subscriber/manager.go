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

// The states of a subscription (docs/subscription.md).
const (
	StatePending    State = iota + 1 // the first attempt is in flight
	StateSubscribed                  // acknowledged, and nothing casts doubt on it
	StateRetrying                    // failed or disrupted: confirming again; listeners keep the last list
	StateHeld                        // an empty list after a disconnection is held back (WithEmptyListHold)
	StateStopped                     // ended for good: Subscription.Err says why
)

// The Manager's last connection report (Manager.conn; 0: none).
const (
	connDown int32 = iota + 1
	connUp
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

// Status is a snapshot of one subscription (docs/subscription.md).
type Status struct {
	ID            uint64 // grows in the order of creation
	Key           Key
	State         State
	Since         time.Time // when State began
	Attempts      int       // Registry.Subscribe calls since the last disruption
	TotalAttempts int
	// LastErr is why the subscription is not subscribed, or why it stopped.
	LastErr      error
	Instances    int // the length of the last delivered list
	Deliveries   int
	LastDelivery time.Time
	// ConfirmedAt and ConfirmReason are the adapter's last Sink.Confirmed.
	ConfirmedAt   time.Time
	ConfirmReason string
	// ConfirmDeadline ends the wait for a confirming adapter; zero if none.
	ConfirmDeadline time.Time
	// HeldSince, HeldUntil and HeldReason describe a held empty list.
	HeldSince  time.Time
	HeldUntil  time.Time
	HeldReason string
	// Deferred counts due attempts refused locally; DeferReason is the last
	// refusal, nil once an attempt is sent.
	Deferred    int
	DeferReason error
}

// counts are a Manager's figures for gauges, read without locking any
// subscription.
type counts struct {
	ByState   [numStates]int // by State; stopped: those Status keeps
	Stopped   uint64         // every subscription stopped since New
	Scheduled int            // due times in the Manager's scheduler
}

// Manager keeps subscriptions to a service registry alive. Create it with New.
// It is safe for concurrent use; Close stops every goroutine it started.
type Manager struct {
	reg       Registry
	opts      options
	log       *zap.Logger
	loopLog   *zap.Logger                             // log with the subscriber component, for the retry Loops
	logs      bool                                    // log enables some level: the subscriptions keep a retry Loop
	confirms  bool                                    // reg is a ConnectionMonitor that confirms reconnects
	table     *[numRunStates][numRunEvents]transition // the retry control of the subscriptions (runtable.go)
	recon     Reconciler                              // nil unless reg implements it
	noLookup  atomic.Bool                             // recon answered with a permanent error: not used any more
	sched     *scheduler
	retrier   *rebound.Retrier      // the policy and the admission of every run but a subscription's first (admit.go)
	starter   *rebound.Retrier      // the same for a subscription's first run: its first attempt takes no token
	observers []rebound.Observer    // the metrics (metrics.go), then WithPolicy's observers
	userObs   bool                  // WithPolicy gave observers
	metrics   *telemetry.Subscriber // nil without a meter in WithPolicy (metrics.go)

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

// New returns a Manager subscribing through reg. Each option states its
// default. A nil reg or a bad option is an *rebound.ArgumentError.
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
	o.observe()
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
		return nil, fmt.Errorf("subscriber.New: WithPolicy: rebound.WithMeterProvider: %w", err)
	}
	m.observers = append(m.observers, o.observers...)
	m.userObs = len(o.observers) > 0
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.sched = newScheduler(&m.wg, m.ctx.Done())
	m.sched.start()
	if mon, ok := reg.(ConnectionMonitor); ok {
		m.confirms = mon.ConfirmsReconnects()
		m.table = tableFor(m.confirms)
		m.wg.Add(1)
		go m.monitor(mon)
	}
	return m, nil
}

// Subscribe starts a subscription of the listener l to key and returns at
// once. l receives the full, sorted list at each change: in order, one call
// at a time, never under a lock. It must not modify the slice; a panic is
// recovered and logged. Subscribe retries until stopped; ctx bounds its
// life, not just the call. A bad argument is an *rebound.ArgumentError;
// after Close the error matches rebound.ErrClosed.
func (m *Manager) Subscribe(ctx context.Context, key Key, l func([]Instance)) (*Subscription, error) {
	return m.subscribe(ctx, key, l, nil)
}

// subscribe is Subscribe; before, if not nil, is called with the new
// subscription before its first attempt starts (Watch: so that the
// attempt's outcome reaches the view).
func (m *Manager) subscribe(ctx context.Context, key Key, l func([]Instance), before func(*Subscription)) (*Subscription, error) {
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
		return nil, argError(fn, "l", "is nil (a listener is required)")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscriber: Subscribe %s: %w", key, context.Cause(ctx))
	}
	key.Clusters = slices.Clone(key.Clusters)
	s := newSubscription(m, ctx, key, l)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("subscriber: Subscribe %s: %w", key, errManagerClosed)
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

// Status returns every running subscription and the last 100 stopped ones,
// in the order they were created.
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

// Connected reports the registry connection as the ConnectionMonitor last
// reported it. reported is false before the first report, and without a
// ConnectionMonitor.
func (m *Manager) Connected() (connected, reported bool) {
	st := m.conn.Load()
	return st == connUp, st != 0
}

// counts returns the Manager's figures without locking any subscription.
func (m *Manager) counts() counts {
	var c counts
	for i := range c.ByState {
		c.ByState[i] = int(m.states[i].Load())
	}
	m.mu.Lock()
	c.ByState[StateStopped] = len(m.retired)
	m.mu.Unlock()
	c.Stopped = m.nStopped.Load()
	c.Scheduled = m.sched.len()
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

// Close stops every subscription and waits for every goroutine of the
// Manager. It is idempotent and returns nil. From a listener or an observer
// it returns rebound.ErrCalledFromCallback at once.
func (m *Manager) Close() error {
	return m.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx. When ctx ends first it returns ctx's
// error, and closing goes on in the background.
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
		if s.stop(errManagerClosed) {
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
	m.states[StateStopped].Add(-1) // the retained entries are counted in counts
}

// onConnection handles a ConnectionMonitor report.
func (m *Manager) onConnection(up bool) {
	reason, kind, st := errDisconnected, disruptLost, connDown
	if up {
		reason, kind, st = nil, disruptReconnected, connUp
	}
	m.conn.Store(st)
	if up {
		m.upSeen.Store(true)
	}
	m.parking.Store(!up && m.upSeen.Load()) // before the snapshot: a subscription not in it sees it
	m.mu.Lock()
	m.down = !up
	if up {
		m.upAt = time.Now()
	}
	m.mu.Unlock()
	subs := m.snapshot()
	m.log.Info("registry connection changed", zap.Bool("connected", up), zap.Int("subscriptions", len(subs)))
	if m.observed() {
		m.emit(event(ConnectionChange{Connected: up, Subscriptions: len(subs), At: time.Now()}))
	}
	for _, s := range subs {
		s.disrupt(kind, reason)
	}
	if !up {
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
