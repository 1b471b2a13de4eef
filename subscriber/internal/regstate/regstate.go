// Package regstate keeps the status of one subscriber.Registration and
// calls its observers, for the registry adapters (subscriber/etcd,
// subscriber/nacos), so that both report the same states the same way.
package regstate

import (
	"maps"
	"math"
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
//
// It keeps the status in fewer bytes than a subscriber.RegistrationStatus
// (a Registration holds one by value, a process may hold tens of
// thousands): the key and the instance field by field, the times as
// wall-clock nanoseconds (Status returns them without a monotonic
// reading), the counts in 32 bits (saturated), the registry's name, the
// metrics, the instance's ID and what the adapters seldom set (a
// namespace, clusters) behind pointers.
type Tracker struct {
	obs *observers      // nil without observers; set by Init
	met *trackerMetrics // nil until StartMetrics with a provider

	mu        sync.Mutex
	registry  *string      // registryRef's
	rare      *trackedRare // nil: none of its fields set
	id        *string      // the instance's ID; nil: empty
	group     string       // the key's
	service   string
	ip        string // the instance's
	cluster   string
	port      uint64
	weight    float64
	metadata  map[string]string
	lastErr   error
	since     int64 // time.Time.UnixNano; 0: never set
	lastErrAt int64 // the same; 0 with no error
	regs      int32 // Registrations
	repairs   int32
	attempts  int32
	state     int8 // a subscriber.RegistrationState
	healthy   bool // the instance's
	enabled   bool
	ephemeral bool
}

// registries are the adapters' names: a Tracker points at them.
var registries = [...]string{"nacos", "etcd"}

func registryRef(name string) *string {
	for i := range registries {
		if registries[i] == name {
			return &registries[i]
		}
	}
	return &name
}

// trackedRare is what the adapters seldom set: the key's namespace and
// clusters.
type trackedRare struct {
	namespace string
	clusters  []string
}

// setKeyLocked records k (its clusters copied).
func (t *Tracker) setKeyLocked(k subscriber.Key) {
	t.group, t.service, t.rare = k.Group, k.Service, nil
	if k.Namespace != "" || k.Clusters != nil {
		t.rare = &trackedRare{namespace: k.Namespace, clusters: cloneKey(k).Clusters}
	}
}

// keyLocked returns the key; its Clusters slice is the Tracker's.
func (t *Tracker) keyLocked() subscriber.Key {
	k := subscriber.Key{Group: t.group, Service: t.service}
	if t.rare != nil {
		k.Namespace, k.Clusters = t.rare.namespace, t.rare.clusters
	}
	return k
}

// setInstLocked records inst, keeping its Metadata map.
func (t *Tracker) setInstLocked(inst subscriber.Instance) {
	t.ip, t.cluster, t.port, t.weight, t.metadata = inst.IP, inst.Cluster, inst.Port, inst.Weight, inst.Metadata
	t.healthy, t.enabled, t.ephemeral = inst.Healthy, inst.Enabled, inst.Ephemeral
	if id := t.instIDLocked(); id != inst.ID {
		t.id = nil
		if inst.ID != "" {
			id := inst.ID
			t.id = &id
		}
	}
}

func (t *Tracker) instIDLocked() string {
	if t.id == nil {
		return ""
	}
	return *t.id
}

// instLocked returns the instance with the Tracker's Metadata map.
func (t *Tracker) instLocked() subscriber.Instance {
	return subscriber.Instance{ID: t.instIDLocked(), IP: t.ip, Port: t.port, Weight: t.weight,
		Healthy: t.healthy, Enabled: t.enabled, Ephemeral: t.ephemeral, Cluster: t.cluster, Metadata: t.metadata}
}

// trackerMetrics is what a Tracker with metrics keeps for them.
type trackerMetrics struct {
	reg      *telemetry.Registration // nil once stopped
	requests [4][2]int64             // by op (telemetry.RegistrationOpNames), success/failure; counted from StartMetrics
}

// unixNano and fromUnixNano convert the Tracker's times.
func unixNano(t time.Time) int64 { return t.UnixNano() }

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// add32 returns n+1, saturated.
func add32(n int32) int32 {
	if n == math.MaxInt32 {
		return n
	}
	return n + 1
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
	m, err := telemetry.NewRegistration(mp, t.registryName(), t.stats)
	if err != nil || m == nil {
		return err
	}
	t.mu.Lock()
	if t.stateLocked() == subscriber.RegistrationStopped {
		t.mu.Unlock()
		return m.Close()
	}
	t.met = &trackerMetrics{reg: m}
	t.mu.Unlock()
	return nil
}

func (t *Tracker) registryName() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.registryLocked()
}

func (t *Tracker) registryLocked() string {
	if t.registry == nil {
		return ""
	}
	return *t.registry
}

func (t *Tracker) stateLocked() subscriber.RegistrationState {
	return subscriber.RegistrationState(t.state)
}

func (t *Tracker) stats() telemetry.RegistrationStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := telemetry.RegistrationStats{State: int(t.state) - 1, Repairs: int64(t.repairs)}
	if t.met != nil {
		st.Requests = t.met.requests
	}
	if t.stateLocked() == subscriber.RegistrationStopped {
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
	t.mu.Lock()
	t.registry = registryRef(registry)
	t.setKeyLocked(key)
	t.setInstLocked(inst)
	t.mu.Unlock()
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
	return cloneKey(t.keyLocked())
}

// Instance returns the registered instance (a copy).
func (t *Tracker) Instance() subscriber.Instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return CloneInstance(t.instLocked())
}

// SetInstance records the registered instance.
func (t *Tracker) SetInstance(inst subscriber.Instance) { t.ShareInstance(CloneInstance(inst)) }

// ShareInstance records the registered instance and keeps its Metadata
// map, which nobody may modify from then on.
func (t *Tracker) ShareInstance(inst subscriber.Instance) {
	t.mu.Lock()
	t.setInstLocked(inst)
	t.mu.Unlock()
}

// SharedInstance returns the registered instance with the Tracker's own
// Metadata map, which the caller must not modify.
func (t *Tracker) SharedInstance() subscriber.Instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.instLocked()
}

// Status returns a snapshot.
func (t *Tracker) Status() subscriber.RegistrationStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return subscriber.RegistrationStatus{
		Registry:      t.registryLocked(),
		Key:           cloneKey(t.keyLocked()),
		Instance:      CloneInstance(t.instLocked()),
		State:         t.stateLocked(),
		Since:         fromUnixNano(t.since),
		Registrations: int(t.regs),
		Repairs:       int(t.repairs),
		Attempts:      int(t.attempts),
		LastErr:       t.lastErr,
		LastErrAt:     fromUnixNano(t.lastErrAt),
	}
}

// State returns the current state.
func (t *Tracker) State() subscriber.RegistrationState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked()
}

// Set moves to state to (a no-op if already there, or once stopped);
// reason is why.
func (t *Tracker) Set(to subscriber.RegistrationState, reason error) { t.set(to, reason, false) }

// Lapse moves from registered to repairing as of at, an earlier time,
// when registered since before at: a disconnection the registration
// learns of late. It makes no event, and does nothing for a Tracker with
// observers (they are told at once: Set).
func (t *Tracker) Lapse(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stateLocked() == subscriber.RegistrationRegistered && t.since < unixNano(at) && t.obs == nil {
		t.state, t.since = int8(subscriber.RegistrationRepairing), unixNano(at)
	}
}

// Deregistering moves to deregistering, from stopped too: a Shutdown
// that follows Close deregisters after the registration stopped. The
// metrics stopped with Close stay stopped.
func (t *Tracker) Deregistering() { t.set(subscriber.RegistrationDeregistering, nil, true) }

func (t *Tracker) set(to subscriber.RegistrationState, reason error, fromStopped bool) {
	t.mu.Lock()
	from := t.stateLocked()
	if from == to || (from == subscriber.RegistrationStopped && !fromStopped) {
		t.mu.Unlock()
		return
	}
	now := time.Now()
	t.state, t.since = int8(to), unixNano(now)
	if to == subscriber.RegistrationRegistered || to == subscriber.RegistrationDeregistering {
		t.attempts = 0 // registered, or a new run: the deregistration's
	}
	if to == subscriber.RegistrationStopped && t.met != nil && t.met.reg != nil {
		m := t.met.reg
		t.met.reg = nil
		defer func() { _ = m.Close() }() // after the lock is released
	}
	if t.obs == nil {
		t.mu.Unlock() // no event to make (its Detail is an allocation)
		return
	}
	t.enqueueLocked(rebound.Event{Kind: rebound.EventStateChanged, Err: reason, Detail: subscriber.RegistrationEvent{
		Registry: t.registryLocked(), Key: t.keyLocked(), From: from, To: to, At: now}})
}

// Registered records an accepted registration (the first or a new one)
// and moves to registered.
func (t *Tracker) Registered() {
	t.mu.Lock()
	t.regs = add32(t.regs)
	t.mu.Unlock()
	t.Set(subscriber.RegistrationRegistered, nil)
}

// Repaired records a repair and moves to registered.
func (t *Tracker) Repaired() {
	t.mu.Lock()
	t.repairs = add32(t.repairs)
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
		t.lastErr, t.lastErrAt = err, unixNano(now)
		res = 1
	}
	if i := opIndex(op); i >= 0 && t.met != nil {
		t.met.requests[i][res]++
	}
	if t.obs == nil {
		t.mu.Unlock()
		return
	}
	t.enqueueLocked(rebound.Event{Kind: rebound.EventAttempt, Err: err, Detail: subscriber.RegistrationEvent{
		Registry: t.registryLocked(), Key: t.keyLocked(), Op: op, Duration: now.Sub(start), At: now}})
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
	if t.stateLocked() != subscriber.RegistrationRegistered {
		t.attempts = int32(min(n, math.MaxInt32))
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
			t.obs.log.Error("registration observer panicked", zap.Stringer("registration", t.Key()), zap.Stringer("kind", ev.Kind), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	o.Observe(ev)
}
