package subscribertest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/rebound-go/rebound/internal/closed"
	"github.com/rebound-go/rebound/subscriber"
)

var (
	// ErrUnavailable is returned by Subscribe while the registry is down.
	// It is transient.
	ErrUnavailable = errors.New("subscribertest: registry unavailable")
	// ErrBroken is passed to Sink.Resubscribe by Break.
	ErrBroken = errors.New("subscribertest: subscription broken")
)

// errClosed is every call's error after Close (permanent).
var errClosed = closed.New("subscribertest: registry closed")

// Stats counts the requests a Registry received.
type Stats struct {
	// Subscribes counts Subscribe calls; Acks those that succeeded.
	Subscribes, Acks int
	// Unsubscribes counts Unsubscribe calls.
	Unsubscribes int
	// Active is the number of sinks currently subscribed.
	Active int
	// Pushes counts the lists sent to sinks (Updates).
	Pushes int
	// Redos counts the re-subscriptions the modelled client made on its
	// own after a reconnect (EnableRedo), rejected ones included.
	Redos int
	// Lookups counts Lookup calls.
	Lookups int
	// PushesLost counts the pushes LoseNextPush made the registry lose.
	PushesLost int
}

// Registry is an in-memory subscriber.Registry and
// subscriber.ConnectionMonitor. The zero value is not usable: call New.
// A Registry is safe for concurrent use. It calls Sink methods while
// holding its lock, which keeps the lists of one key in order (Sink
// methods never block).
type Registry struct {
	mu       sync.Mutex
	down     bool
	closed   bool
	services map[string][]subscriber.Instance
	sinks    map[subscriber.Sink]string // acknowledged sinks -> key
	fail     func(key subscriber.Key) error
	hook     func(key subscriber.Key)
	stats    Stats
	monitors map[*monitor]struct{}
	redo     map[subscriber.Sink]subscriber.Key // client-side subscriptions, when redo is on
	version  map[string]uint64                  // Set calls
	pushed   map[subscriber.Sink]uint64         // the version last pushed to a sink
	lose     map[subscriber.Sink]bool           // sinks that lose the next push (LoseNextPush)
	redoFn   func(key subscriber.Key) RedoOutcome
	redoOn   bool
}

// RedoOutcome is what the modelled client's re-subscription after a
// reconnect does for one subscription (see EnableRedo).
type RedoOutcome int

const (
	// RedoConfirm: the redo works; the adapter pushes the list and calls
	// Sink.Confirmed("push").
	RedoConfirm RedoOutcome = iota
	// RedoReject: the server rejects the redo; the adapter calls
	// Sink.Resubscribe(ErrRejected).
	RedoReject
	// RedoSilent: the redo is lost and the adapter says nothing (the
	// Manager's safety cap must catch it).
	RedoSilent
)

// ErrRejected is passed to Sink.Resubscribe for a redo rejected by
// EnableRedo's outcome.
var ErrRejected = errors.New("subscribertest: re-subscription rejected")

type monitor struct {
	queue  []bool
	signal chan struct{}
}

// New returns an up, empty Registry.
func New() *Registry {
	return &Registry{
		services: make(map[string][]subscriber.Instance),
		sinks:    make(map[subscriber.Sink]string),
		monitors: make(map[*monitor]struct{}),
		redo:     make(map[subscriber.Sink]subscriber.Key),
		version:  make(map[string]uint64),
		pushed:   make(map[subscriber.Sink]uint64),
		lose:     make(map[subscriber.Sink]bool),
	}
}

// Subscribe implements subscriber.Registry. It returns an error matching
// rebound.ErrClosed after Close, ErrUnavailable while down, the
// failure hook's error if it returns one, and otherwise registers sink
// (replacing a previous registration of the same sink) and sends it the
// key's current list before returning nil.
func (r *Registry) Subscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	r.mu.Lock()
	r.stats.Subscribes++
	hook, fail := r.hook, r.fail
	r.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return errClosed
	case r.down:
		return ErrUnavailable
	}
	if fail != nil {
		r.mu.Unlock()
		err := fail(key)
		r.mu.Lock()
		if err != nil {
			return err
		}
	}
	ks := key.String()
	r.sinks[sink] = ks
	r.redo[sink] = key
	r.stats.Acks++
	r.pushLocked(sink, ks)
	return nil
}

// Unsubscribe implements subscriber.Registry.
func (r *Registry) Unsubscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Unsubscribes++
	delete(r.sinks, sink)
	delete(r.redo, sink)
	delete(r.pushed, sink)
	delete(r.lose, sink)
	if r.closed {
		return errClosed
	}
	return nil
}

// MonitorConnection implements subscriber.ConnectionMonitor: it reports
// false (lost) first if the registry is down when it starts, then the
// transitions made by SetDown and Restart, until ctx is done or the
// Registry is closed.
func (r *Registry) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	mon := &monitor{signal: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.down {
		mon.queue = append(mon.queue, false)
	}
	r.monitors[mon] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.monitors, mon)
		r.mu.Unlock()
	}()
	for {
		r.mu.Lock()
		queue, closed := mon.queue, r.closed
		mon.queue = nil
		r.mu.Unlock()
		for _, st := range queue {
			report(st)
			if st {
				r.redoAll()
			}
		}
		if closed {
			return errClosed
		}
		select {
		case <-ctx.Done():
			return nil
		case <-mon.signal:
		}
	}
}

func (r *Registry) reportLocked(states ...bool) {
	for mon := range r.monitors {
		mon.queue = append(mon.queue, states...)
		select {
		case mon.signal <- struct{}{}:
		default:
		}
	}
}

// Set makes instances the key's list and, unless the registry is down,
// pushes it to every sink subscribed to key.
func (r *Registry) Set(key subscriber.Key, instances ...subscriber.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := key.String()
	r.services[ks] = slices.Clone(instances)
	r.version[ks]++
	if r.down {
		return
	}
	for sink, k := range r.sinks {
		if k != ks {
			continue
		}
		if r.lose[sink] {
			delete(r.lose, sink)
			r.stats.PushesLost++
			continue
		}
		r.pushLocked(sink, ks)
	}
}

// LoseNextPush makes the registry lose the next list Set pushes to every
// sink subscribed to key now, and returns how many sinks will lose one: the
// registry holds the new list (Lookup returns it) but those sinks keep the
// one they had, as with a push lost on the way or a client that stored an
// older reply over a newer one (nacos-sdk-go v2.3.2's ProcessService has no
// lock). Counted in Stats.PushesLost.
func (r *Registry) LoseNextPush(key subscriber.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks, n := key.String(), 0
	for sink, k := range r.sinks {
		if k == ks {
			r.lose[sink] = true
			n++
		}
	}
	return n
}

func (r *Registry) pushLocked(sink subscriber.Sink, ks string) {
	list := r.services[ks]
	out := make([]subscriber.Instance, len(list))
	for i, in := range list {
		in.Metadata = maps.Clone(in.Metadata)
		out[i] = in
	}
	r.stats.Pushes++
	r.pushed[sink] = r.version[ks]
	sink.Update(out)
}

// SetDown takes the registry down (Subscribe fails with ErrUnavailable, no
// pushes; monitors see false) or brings it up again (monitors see
// true). Subscriptions survive; lists changed while down are not
// pushed until sinks subscribe again.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down == down {
		return
	}
	r.down = down
	if down {
		r.reportLocked(false)
	} else {
		r.reportLocked(true)
	}
}

// Restart simulates a registry restart with fresh state: every
// subscription is forgotten (sinks get no more pushes until they subscribe
// again) and monitors see false then true. Lists set with Set
// are kept (set them again to model providers re-registering).
func (r *Registry) Restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sinks)
	clear(r.lose)
	r.reportLocked(false, true)
}

// Forget drops every subscription silently, with no monitor event: the
// way a client's failed re-subscription loses them.
func (r *Registry) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sinks)
	clear(r.lose)
}

// Break drops the subscriptions to key and calls Resubscribe(ErrBroken) on
// their sinks, as an etcd adapter does when a watch fails.
func (r *Registry) Break(key subscriber.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := key.String()
	for sink, k := range r.sinks {
		if k == ks {
			delete(r.sinks, sink)
			delete(r.lose, sink)
			sink.Resubscribe(ErrBroken)
		}
	}
}

// Close closes the registry: Subscribe fails with an error matching
// rebound.ErrClosed from now on, and MonitorConnection returns.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.reportLocked()
}

// SetFailure sets a hook called by every Subscribe that would otherwise
// succeed; a non-nil error is returned instead (wrap it with
// rebound.Permanent, or wrap rebound.ErrClosed, to make it permanent).
// The hook runs without the Registry's lock; it may block (for example on
// a channel) to model a slow registry. nil removes it.
func (r *Registry) SetFailure(fn func(key subscriber.Key) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fn
}

// OnSubscribe sets a hook called at the start of every Subscribe, without
// the Registry's lock (for example to record request times). nil removes it.
func (r *Registry) OnSubscribe(fn func(key subscriber.Key)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = fn
}

// Stats returns the request counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Active = len(r.sinks)
	return st
}

// Subscribed reports whether sinks subscribed to key are registered, and
// how many.
func (r *Registry) Subscribed(key subscriber.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := key.String()
	n := 0
	for _, k := range r.sinks {
		if k == ks {
			n++
		}
	}
	return n
}

// EnableRedo makes the Registry model a client that re-subscribes on its
// own after a reconnect and an adapter that confirms from evidence (as
// nacos-sdk-go's redo and subscriber/nacos do): ConfirmsReconnects returns
// true, and after each connect report (true) (SetDown(false), Restart) the
// monitor re-registers every subscription the client holds and, per
// outcome(key) (nil: always RedoConfirm), pushes the list if it changed
// since the sink last got it and calls Sink.Confirmed("push"), calls Sink.Resubscribe(ErrRejected), or does
// nothing. Call it before subscriber.New (which asks ConfirmsReconnects
// once). The redo runs in the MonitorConnection goroutine right after the
// report; with several Managers on one Registry each monitor redoes every
// subscription.
func (r *Registry) EnableRedo(outcome func(key subscriber.Key) RedoOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redoOn, r.redoFn = true, outcome
}

// ConfirmsReconnects implements subscriber.ConnectionMonitor: true after
// EnableRedo.
func (r *Registry) ConfirmsReconnects() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.redoOn
}

// redoAll is the modelled client's redo after a reconnect.
func (r *Registry) redoAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.redoOn || r.down || r.closed {
		return
	}
	for sink, key := range r.redo {
		out := RedoConfirm
		if r.redoFn != nil {
			r.mu.Unlock()
			out = r.redoFn(key)
			r.mu.Lock()
		}
		switch out {
		case RedoConfirm:
			r.stats.Redos++
			ks := key.String()
			r.sinks[sink] = ks
			if v, ok := r.pushed[sink]; !ok || v != r.version[ks] {
				r.pushLocked(sink, ks) // like the SDK: callbacks only for a changed list
			}
			sink.Confirmed("push")
		case RedoReject:
			r.stats.Redos++
			sink.Resubscribe(ErrRejected)
		}
	}
}

// Lookup implements subscriber.Reconciler: the key's current list, or
// ErrUnavailable while down.
func (r *Registry) Lookup(ctx context.Context, key subscriber.Key) ([]subscriber.Instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Lookups++
	switch {
	case r.closed:
		return nil, errClosed
	case r.down:
		return nil, ErrUnavailable
	}
	list := r.services[key.String()]
	out := make([]subscriber.Instance, len(list))
	for i, in := range list {
		in.Metadata = maps.Clone(in.Metadata)
		out[i] = in
	}
	return out, nil
}

var (
	_ subscriber.Registry          = (*Registry)(nil)
	_ subscriber.ConnectionMonitor = (*Registry)(nil)
	_ subscriber.Reconciler        = (*Registry)(nil)
)
