package subscriber

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
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
	// (connection lost or re-established, Sink.Resubscribe), and the loop
	// is trying to (re)confirm it. Listeners keep the last list.
	StateRetrying
	// StateStopped: the subscription ended for good (Unsubscribe, its
	// context, Close, or a permanent registry error); see
	// Subscription.Err.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateSubscribed:
		return "subscribed"
	case StateRetrying:
		return "retrying"
	case StateStopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Status is a snapshot of one subscription.
type Status struct {
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
	// or the error given to Sink.Resubscribe) while not subscribed; nil
	// once an attempt succeeds. For a stopped subscription it is the reason
	// it stopped.
	LastErr error
	// Instances is the length of the list last delivered to the listener.
	Instances int
	// Deliveries counts the listener calls.
	Deliveries int
	// ConfirmedAt is when the adapter last reported evidence that the
	// registry holds the subscription (Sink.Confirmed), and ConfirmReason
	// the evidence it named; zero and empty if it never did.
	ConfirmedAt   time.Time
	ConfirmReason string
	// ConfirmDeadline is set while the Manager waits for a
	// ReconnectConfirmer's evidence after a reconnect: when the safety cap
	// (WithConfirmTimeout) ends the wait. Zero otherwise.
	ConfirmDeadline time.Time
}

// Manager keeps subscriptions to a service registry alive: each
// subscription is retried in the background until the registry
// acknowledges it, confirmed again after every reconnect, and its listener
// receives every change of the instance list exactly once, in order.
//
// Create a Manager with New; the zero Manager is not usable. A Manager is
// safe for concurrent use. It owns every goroutine it starts: Close stops
// them all and waits for them.
type Manager struct {
	reg      Registry
	opts     options
	log      *zap.Logger
	confirms bool // reg is a ReconnectConfirmer that confirms reconnects

	ctx    context.Context // cancelled by Close: stops the connection monitor
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the Manager

	mu     sync.Mutex
	closed bool
	nextID uint64
	subs   map[uint64]*Subscription

	closeOnce sync.Once
	allDone   chan struct{} // closed when Close has finished
}

// New returns a Manager subscribing through reg. If reg implements
// ConnectionMonitor, New starts a goroutine running it (stopped by Close).
//
// It returns an *ArgumentError (wrapping ErrInvalidArgument) for a nil reg
// or a bad option. Defaults: the zero rebound.Policy (see WithPolicy), a
// shared limiter of DefaultLimit per second with bursts of DefaultBurst
// (WithLimiter), an empty-list hold of DefaultEmptyListHold
// (WithEmptyListHold), no logging (WithLogger).
func New(reg Registry, opts ...Option) (*Manager, error) {
	if reg == nil {
		return nil, argError("New", "reg", "is nil")
	}
	o := options{hold: DefaultEmptyListHold, confirmCap: DefaultConfirmTimeout, refreshMin: DefaultRefreshInterval}
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
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	m := &Manager{
		reg:     reg,
		opts:    o,
		log:     log.With(zap.String("component", "subscriber")),
		subs:    make(map[uint64]*Subscription),
		allDone: make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if mon, ok := reg.(ConnectionMonitor); ok {
		if rc, ok := reg.(ReconnectConfirmer); ok {
			m.confirms = rc.ConfirmsReconnects()
		}
		m.wg.Add(1)
		go m.monitor(mon)
	}
	return m, nil
}

// Subscribe starts a subscription of l to key and returns at once; a
// background loop (rebound.Retry with the Manager's policy: jittered,
// capped, unlimited attempts) calls Registry.Subscribe until the registry
// acknowledges, then Ready is closed. Transient errors (unreachable,
// timeouts, server errors) never end the loop; see Registry for the
// permanent ones.
//
// ctx bounds the life of the subscription, not just the call: when ctx is
// done the subscription stops (as if Unsubscribe were called, with Err
// returning context.Cause(ctx)). Use context.Background() for a
// subscription that lives until Unsubscribe or Close. ctx's values are
// passed on to every Registry call of the subscription.
//
// Errors: an *ArgumentError (wrapping ErrInvalidArgument) for a nil ctx, an
// empty key.Service or cluster name, or a nil l; ctx's error if it is
// already done; ErrManagerClosed (wrapped) after Close. Several
// subscriptions may share a key; each has its own listener.
func (m *Manager) Subscribe(ctx context.Context, key Key, l Listener) (*Subscription, error) {
	const fn = "Subscribe"
	if ctx == nil {
		return nil, argError(fn, "ctx", "is nil")
	}
	if key.Service == "" {
		return nil, argError(fn, "key.Service", "is empty")
	}
	for i, c := range key.Clusters {
		if c == "" {
			return nil, argError(fn, fmt.Sprintf("key.Clusters[%d]", i), "is empty")
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
		s.cancel(ErrManagerClosed)
		return nil, fmt.Errorf("subscriber: Subscribe %s: %w", key, ErrManagerClosed)
	}
	m.nextID++
	s.id = m.nextID
	m.subs[s.id] = s
	m.mu.Unlock()

	s.start()
	return s, nil
}

// Status returns a snapshot of every subscription that has not finished
// stopping, in the order they were created.
func (m *Manager) Status() []Status {
	subs := m.snapshot()
	out := make([]Status, 0, len(subs))
	for _, s := range subs {
		out = append(out, s.Status())
	}
	return out
}

// Close stops every subscription (each one's Registry.Unsubscribe is
// called, bounded by UnsubscribeTimeout), stops the connection monitor, and
// waits until every goroutine of the Manager has returned, including
// listener calls in progress: do not call Close from a listener. It is
// idempotent and safe to call concurrently; it always returns nil
// (registry Unsubscribe errors are logged). Subscribe fails with
// ErrManagerClosed afterwards.
func (m *Manager) Close() error {
	return m.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx: it starts closing the Manager (once)
// and waits until it is done or ctx is; in the latter case it returns an
// error wrapping ctx.Err() while the Manager finishes closing in the
// background (a later Close or Shutdown waits for it).
func (m *Manager) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return argError("Shutdown", "ctx", "is nil")
	}
	m.closeOnce.Do(m.startClose)
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
		close(m.allDone)
	}()
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
	slices.SortFunc(subs, func(a, b *Subscription) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return subs
}

func (m *Manager) remove(s *Subscription) {
	m.mu.Lock()
	delete(m.subs, s.id)
	m.mu.Unlock()
}

func (m *Manager) monitor(mon ConnectionMonitor) {
	defer m.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("connection monitor panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	err := mon.MonitorConnection(m.ctx, m.onConnection)
	if err != nil && m.ctx.Err() == nil {
		m.log.Error("connection monitor stopped", zap.Error(err))
	}
}

// onConnection handles a ConnectionMonitor report.
func (m *Manager) onConnection(st ConnState) {
	var reason error
	switch st {
	case Disconnected:
		reason = ErrDisconnected
	case Connected:
	default:
		return
	}
	subs := m.snapshot()
	m.log.Info("registry connection changed", zap.Stringer("state", st), zap.Int("subscriptions", len(subs)))
	for _, s := range subs {
		if m.confirms && s.awaitEvidence(st) {
			continue
		}
		s.disrupt(reason, st == Disconnected)
	}
}
