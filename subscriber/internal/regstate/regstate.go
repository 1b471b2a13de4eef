// Package regstate keeps the status of one subscriber.Registration and
// calls its observers, for the registry adapters (subscriber/etcd,
// subscriber/nacos), so that both report the same states the same way.
package regstate

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/subscriber"
)

// Tracker holds a registration's status. Its methods are safe for
// concurrent use; observers are called outside its lock, one at a time,
// in the order of the events, by the goroutine that recorded an event
// while no other goroutine was calling observers.
type Tracker struct {
	obs *observers // nil without observers; set by Init

	mu       sync.Mutex
	st       subscriber.RegistrationStatus
	requests *[4][2]int64 // by op (telemetry.RegistrationOpNames), success/failure; counted from StartMetrics
	metrics  *telemetry.Registration
}

// observers is what a Tracker with observers keeps for them (apart, so
// that a Tracker without observers keeps none of it).
type observers struct {
	list   []rebound.Observer
	log    *zap.Logger
	queue  []rebound.Event // under the Tracker's mu
	caller atomic.Uint64   // the goroutine calling observers (goid), 0 when none (written under the Tracker's mu)
	worker atomic.Uint64   // the goroutine running the registration's work (Enter), 0 when none
}

// InObserver reports whether the calling goroutine may be running one of
// the registration's observers: it calls them (the registration's
// events), or it runs the registration's work (Enter), where the engine
// calls them (its events). Close, Shutdown and Update called there would
// wait for that work: they act without waiting for it.
func (t *Tracker) InObserver() bool {
	if t.obs == nil {
		return false
	}
	c, w := t.obs.caller.Load(), t.obs.worker.Load()
	if c == 0 && w == 0 {
		return false
	}
	id := goid.ID()
	return id == c || id == w
}

// Enter marks the calling goroutine as running the registration's work
// (a step of its Loop, Shutdown's requests) until Leave, so that
// InObserver tells an observer the engine calls there. It marks nothing
// without observers, or while another goroutine is marked (a nil t too).
// It reports whether it marked: pass that to Leave.
func (t *Tracker) Enter() bool {
	if t == nil || t.obs == nil {
		return false
	}
	return t.obs.worker.CompareAndSwap(0, goid.ID())
}

// Leave ends the mark of Enter, if entered.
func (t *Tracker) Leave(entered bool) {
	if entered {
		t.obs.worker.Store(0)
	}
}

// StartMetrics reports the registration's rebound.registration.*
// instruments on mp (nothing for a nil mp) until it stops.
func (t *Tracker) StartMetrics(mp metric.MeterProvider) error {
	m, err := telemetry.NewRegistration(mp, t.st.Registry, t.stats)
	if err != nil || m == nil {
		return err
	}
	t.mu.Lock()
	if t.st.State == subscriber.RegistrationStopped {
		t.mu.Unlock()
		return m.Close()
	}
	t.metrics = m
	t.requests = new([4][2]int64)
	t.mu.Unlock()
	return nil
}

func (t *Tracker) stats() telemetry.RegistrationStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := telemetry.RegistrationStats{State: int(t.st.State) - 1, Repairs: int64(t.st.Repairs)}
	if t.requests != nil {
		st.Requests = *t.requests
	}
	if t.st.State == subscriber.RegistrationStopped {
		st.State = -1
	}
	return st
}

func opIndex(op string) int {
	for i, n := range telemetry.RegistrationOpNames {
		if n == op {
			return i
		}
	}
	return -1
}

// New returns a Tracker in state registering (the observers see From 0).
func New(registry string, key subscriber.Key, inst subscriber.Instance, obs []rebound.Observer, log *zap.Logger) *Tracker {
	t := new(Tracker)
	t.Init(registry, key, CloneInstance(inst), obs, log)
	return t
}

// Init makes the zero t a Tracker in state registering, as New does, for
// a Tracker held by value. It keeps inst's Metadata map, which nobody
// may modify from then on.
func (t *Tracker) Init(registry string, key subscriber.Key, inst subscriber.Instance, obs []rebound.Observer, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	if len(obs) > 0 {
		t.obs = &observers{list: obs, log: log}
	}
	t.st = subscriber.RegistrationStatus{Registry: registry, Key: cloneKey(key), Instance: inst}
	t.Set(subscriber.RegistrationRegistering, nil)
}

// CloneInstance returns inst with its own Metadata map.
func CloneInstance(inst subscriber.Instance) subscriber.Instance {
	if inst.Metadata != nil {
		inst.Metadata = maps.Clone(inst.Metadata)
	}
	return inst
}

func cloneKey(k subscriber.Key) subscriber.Key {
	if k.Clusters != nil {
		k.Clusters = append([]string(nil), k.Clusters...)
	}
	return k
}

// Key returns the registration's key (a copy).
func (t *Tracker) Key() subscriber.Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneKey(t.st.Key)
}

// Instance returns the registered instance (a copy).
func (t *Tracker) Instance() subscriber.Instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return CloneInstance(t.st.Instance)
}

// SetInstance records the registered instance.
func (t *Tracker) SetInstance(inst subscriber.Instance) { t.ShareInstance(CloneInstance(inst)) }

// ShareInstance records the registered instance and keeps its Metadata
// map, which nobody may modify from then on.
func (t *Tracker) ShareInstance(inst subscriber.Instance) {
	t.mu.Lock()
	t.st.Instance = inst
	t.mu.Unlock()
}

// SharedInstance returns the registered instance with the Tracker's own
// Metadata map, which the caller must not modify.
func (t *Tracker) SharedInstance() subscriber.Instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.Instance
}

// Status returns a snapshot.
func (t *Tracker) Status() subscriber.RegistrationStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st
	st.Key = cloneKey(st.Key)
	st.Instance = CloneInstance(st.Instance)
	return st
}

// State returns the current state.
func (t *Tracker) State() subscriber.RegistrationState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.State
}

// Set moves to state to (a no-op if already there, or once stopped);
// reason is why.
func (t *Tracker) Set(to subscriber.RegistrationState, reason error) { t.set(to, reason, false) }

// Deregistering moves to deregistering, from stopped too: a Shutdown
// that follows Close deregisters after the registration stopped. The
// metrics stopped with Close stay stopped.
func (t *Tracker) Deregistering() { t.set(subscriber.RegistrationDeregistering, nil, true) }

func (t *Tracker) set(to subscriber.RegistrationState, reason error, fromStopped bool) {
	t.mu.Lock()
	from := t.st.State
	if from == to || (from == subscriber.RegistrationStopped && !fromStopped) {
		t.mu.Unlock()
		return
	}
	now := time.Now()
	t.st.State, t.st.Since = to, now
	if to == subscriber.RegistrationRegistered || to == subscriber.RegistrationDeregistering {
		t.st.Attempts = 0 // registered, or a new run: the deregistration's
	}
	if to == subscriber.RegistrationStopped && t.metrics != nil {
		m := t.metrics
		t.metrics = nil
		defer func() { _ = m.Close() }() // after the lock is released
	}
	t.enqueueLocked(rebound.Event{Kind: rebound.EventStateChanged, Err: reason, Detail: subscriber.RegistrationEvent{
		Registry: t.st.Registry, Key: t.st.Key, From: from, To: to, At: now}})
}

// Registered records an accepted registration (the first or a new one)
// and moves to registered.
func (t *Tracker) Registered() {
	t.mu.Lock()
	t.st.Registrations++
	t.mu.Unlock()
	t.Set(subscriber.RegistrationRegistered, nil)
}

// Repaired records a repair and moves to registered.
func (t *Tracker) Repaired() {
	t.mu.Lock()
	t.st.Repairs++
	t.mu.Unlock()
	t.Set(subscriber.RegistrationRegistered, nil)
}

// Attempt records one request: a failure is LastErr. (Attempts is the
// repair's Schedule's count: see SetAttempts.)
func (t *Tracker) Attempt(op string, start time.Time, err error) {
	t.mu.Lock()
	now := time.Now()
	res := 0
	if err != nil {
		t.st.LastErr, t.st.LastErrAt = err, now
		res = 1
	}
	if i := opIndex(op); i >= 0 && t.requests != nil {
		t.requests[i][res]++
	}
	t.enqueueLocked(rebound.Event{Kind: rebound.EventAttempt, Err: err, Detail: subscriber.RegistrationEvent{
		Registry: t.st.Registry, Key: t.st.Key, Op: op, Duration: now.Sub(start), At: now}})
}

// SetAttempts records the failed attempts of the current repair (or
// deregistration) as its rebound.Schedule counts them (Attempts, local
// refusals included); moving to registered or to deregistering (a new
// run) sets it back to 0. While
// registered it records nothing: a check deferred by a local refusal is
// no repair, and Attempts is 0 when registered (the check that then
// finds the instance listed leaves the state as it is).
func (t *Tracker) SetAttempts(n int) {
	t.mu.Lock()
	if t.st.State != subscriber.RegistrationRegistered {
		t.st.Attempts = n
	}
	t.mu.Unlock()
}

// enqueueLocked queues an event and, unless another goroutine is calling
// observers, calls them until the queue is empty. t.mu is held on entry
// and released on return.
func (t *Tracker) enqueueLocked(ev rebound.Event) {
	o := t.obs
	if o == nil {
		t.mu.Unlock()
		return
	}
	o.queue = append(o.queue, ev)
	if o.caller.Load() != 0 {
		t.mu.Unlock()
		return
	}
	o.caller.Store(goid.ID())
	for len(o.queue) > 0 {
		ev := o.queue[0]
		o.queue[0] = rebound.Event{}
		o.queue = o.queue[1:]
		t.mu.Unlock()
		t.call(ev)
		t.mu.Lock()
	}
	o.queue = nil
	o.caller.Store(0)
	t.mu.Unlock()
}

func (t *Tracker) call(ev rebound.Event) {
	for _, o := range t.obs.list {
		t.observe(o, ev)
	}
}

func (t *Tracker) observe(o rebound.Observer, ev rebound.Event) {
	defer func() {
		if r := recover(); r != nil {
			t.obs.log.Error("registration observer panicked", zap.Stringer("registration", t.st.Key), zap.Stringer("kind", ev.Kind), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	o.Observe(ev)
}
