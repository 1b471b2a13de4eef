package reboundkratos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-kratos/kratos/v2/registry"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// ErrClosed is returned by Watch and GetService after Discovery.Close,
// and by Register after Registrar.Close. It matches rebound.ErrClosed.
var ErrClosed = rebound.NewClosedError("reboundkratos: closed")

// ErrWatcherStopped is returned by Next after Stop (or after the
// Discovery was closed). It matches rebound.ErrClosed and
// context.Canceled, so kratos' resolvers end their watch loop on it
// instead of retrying it every second.
var ErrWatcherStopped error = stoppedError{}

type stoppedError struct{}

func (stoppedError) Error() string { return "reboundkratos: watcher stopped" }
func (stoppedError) Is(target error) bool {
	return target == rebound.ErrClosed || target == context.Canceled
}

// Discovery is a kratos registry.Discovery over a subscriber.Manager:
// pass it to kratos' clients (transport/grpc.WithDiscovery,
// transport/http.WithDiscovery) and dial "discovery:///<name>".
//
// Every Watch of a name, and GetService, read one shared view of the
// name's key (subscriber.View, in the Discovery's subscriber.WatchGroup):
// the Manager's one subscription of the key, shared with every other
// reader of it (a gRPC Builder, a cluster.RegistryDirectory). A watcher's
// Stop releases only its own share; the Discovery lets go of the view
// with the name's last watcher (GetService keeps its name until Close).
// The Manager keeps the subscription alive through registry outages and
// restarts, so Watch never blocks and never fails because the registry is
// down.
//
// Create it with NewDiscovery; the zero Discovery is not usable. It is
// safe for concurrent use. It does not own the Manager: close the kratos
// clients, then the Discovery, then the Manager.
type Discovery struct {
	m   *subscriber.Manager
	f   Format
	o   discoveryOptions
	log *zap.Logger

	views *subscriber.WatchGroup // the shared views of the names' keys
	wg    sync.WaitGroup         // the entries' follow goroutines

	mu      sync.Mutex
	closed  bool
	entries map[string]*entry // by name
	// retired holds the entries replaced after their subscription stopped
	// for good while watchers still hold them, so that Close stops those
	// watchers too.
	retired map[*entry]struct{}

	subscribes, unsubscribes atomic.Uint64
}

// entry is one name: its view, kratos' form of the list, and the
// watchers to hand each list to.
type entry struct {
	name    string
	key     subscriber.Key
	v       *subscriber.View
	ready   chan struct{} // closed by the first list
	quit    chan struct{} // closed when the Discovery lets go of the view: follow returns
	stopped chan struct{} // closed when the view's subscription stopped for good
	stopErr error         // why; set before stopped is closed

	// the delivery goroutine's own
	prev     []subscriber.Instance
	prevConv []*registry.ServiceInstance // aligned with prev; nil: left out
	spare    []*registry.ServiceInstance // the buffer convert fills next

	// guarded by Discovery.mu
	refs     int // watchers, plus one when pinned
	pinned   bool
	removed  bool
	hasList  bool
	list     []*registry.ServiceInstance
	watchers map[*watcher]struct{}
}

// NewDiscovery returns a Discovery over m reading instances stored in
// format f. It returns a *rebound.ArgumentError (matching
// rebound.ErrInvalidArgument) for a nil m, an unknown f or a bad option,
// and an error wrapping subscriber.ErrManagerClosed if m is closed.
// Defaults: names map to keys as WithKeyFunc describes, group
// DefaultGroup (FormatNacos), all clusters, kind DefaultKind,
// DefaultMaxPending lists kept per watcher, no logging.
func NewDiscovery(m *subscriber.Manager, f Format, opts ...DiscoveryOption) (*Discovery, error) {
	o := discoveryOptions{kind: DefaultKind, maxPending: DefaultMaxPending}
	if m == nil {
		o.bad("NewDiscovery", "m", "is nil (a *subscriber.Manager is required)")
	}
	if !f.valid() {
		o.bad("NewDiscovery", "f", "must be FormatNacos or FormatEtcd; got "+f.String())
	}
	for _, opt := range opts {
		if opt != nil {
			opt.applyDiscovery(&o)
		}
	}
	if f == FormatEtcd && (o.group != "" || o.namespace != "" || len(o.clusters) > 0) {
		o.bad("NewDiscovery", "opts", "WithGroup, WithNamespace and WithClusters do not apply to FormatEtcd (its keys have no group, namespace or cluster)")
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	if m.Closed() {
		return nil, fmt.Errorf("reboundkratos.NewDiscovery: %w", subscriber.ErrManagerClosed)
	}
	views, err := m.NewWatchGroup()
	if err != nil {
		return nil, fmt.Errorf("reboundkratos.NewDiscovery: %w", err)
	}
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	return &Discovery{m: m, f: f, o: o, log: log.With(zap.String("component", "reboundkratos")), views: views, entries: make(map[string]*entry)}, nil
}

// DiscoveryStats counts what a Discovery did, for tests and dashboards.
type DiscoveryStats struct {
	// Subscriptions is the number of names whose shared view the
	// Discovery holds now.
	Subscriptions int
	// Watchers is the number of watchers not stopped.
	Watchers int
	// Subscribes and Unsubscribes count the views of names the Discovery
	// opened and closed since NewDiscovery.
	Subscribes, Unsubscribes uint64
}

// Stats returns the Discovery's counters.
func (d *Discovery) Stats() DiscoveryStats {
	d.mu.Lock()
	st := DiscoveryStats{Subscriptions: len(d.entries)}
	for _, e := range d.entries {
		st.Watchers += len(e.watchers)
	}
	for e := range d.retired {
		st.Watchers += len(e.watchers)
	}
	d.mu.Unlock()
	st.Subscribes, st.Unsubscribes = d.subscribes.Load(), d.unsubscribes.Load()
	return st
}

// key maps a service name to its subscriber.Key.
func (d *Discovery) key(fn, name string) (subscriber.Key, error) {
	if strings.TrimSpace(name) == "" {
		return subscriber.Key{}, &rebound.ArgumentError{Func: "reboundkratos.Discovery." + fn, Arg: "serviceName", Reason: "is empty or only white space (dial discovery:///<name>)"}
	}
	if d.o.keyFunc != nil {
		k, err := d.keyFunc(name)
		if err != nil {
			return subscriber.Key{}, fmt.Errorf("reboundkratos: key of %q: %w", name, err)
		}
		return k, nil
	}
	if d.f == FormatEtcd {
		if strings.Contains(name, "/") {
			return subscriber.Key{}, &rebound.ArgumentError{Func: "reboundkratos.Discovery." + fn, Arg: "serviceName", Reason: `must not contain "/" (it is a segment of the etcd key); got ` + strconv.Quote(name)}
		}
		return subscriber.Key{Service: name}, nil
	}
	return subscriber.Key{Namespace: d.o.namespace, Group: d.o.group, Service: name, Clusters: d.o.clusters}, nil
}

// keyFunc calls WithKeyFunc's function, turning a panic into an error.
func (d *Discovery) keyFunc(name string) (k subscriber.Key, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("WithKeyFunc's function panicked: %v", r)
			d.log.Error("recovered a panic of the WithKeyFunc function", zap.String("service", name),
				zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	return d.o.keyFunc(name)
}

// errNeedKey is acquireLocked's answer when it needs the name's key.
var errNeedKey = errors.New("reboundkratos: key needed")

// lockAcquire takes d.mu and returns name's entry with one more
// reference (or the pin), opening the name's view if there is none; d.mu
// is held on return unless there is an error. The name's key (the user's
// WithKeyFunc function) is computed with no lock held, only when no entry
// can be used.
func (d *Discovery) lockAcquire(fn, name string, pin bool) (*entry, error) {
	var key *subscriber.Key
	for {
		d.mu.Lock()
		e, err := d.acquireLocked(fn, name, pin, key)
		if err != errNeedKey {
			if err != nil {
				d.mu.Unlock()
			}
			return e, err
		}
		d.mu.Unlock()
		k, err := d.key(fn, name)
		if err != nil {
			return nil, err
		}
		key = &k
	}
}

// acquireLocked returns name's entry with one more reference (or the
// pin), opening the name's view with key if there is none (errNeedKey
// without a key). Called with d.mu held; the entry's follow goroutine
// waits for d.mu to deliver.
func (d *Discovery) acquireLocked(fn, name string, pin bool, key *subscriber.Key) (*entry, error) {
	if d.closed {
		return nil, ErrClosed
	}
	e := d.entries[name]
	if e != nil {
		select {
		case <-e.stopped: // stopped for good (permanent error): start again
			d.removeLocked(e)
			d.unsubscribeAsync(e) // releases its view
			if len(e.watchers) > 0 {
				if d.retired == nil {
					d.retired = make(map[*entry]struct{})
				}
				d.retired[e] = struct{}{}
			}
			e = nil
		default:
		}
	}
	if e == nil {
		if key == nil {
			return nil, errNeedKey
		}
		e = &entry{name: name, key: *key, ready: make(chan struct{}), quit: make(chan struct{}), stopped: make(chan struct{}),
			watchers: make(map[*watcher]struct{})}
		v, err := d.views.Watch(*key)
		if err != nil {
			return nil, fmt.Errorf("reboundkratos: subscribe %q: %w", name, err)
		}
		e.v = v
		d.wg.Add(1)
		go d.follow(e)
		d.entries[name] = e
		d.subscribes.Add(1)
		d.log.Info("subscribed", zap.String("service", name), zap.Stringer("key", *key))
	}
	if !pin {
		e.refs++
	} else if !e.pinned {
		e.pinned = true
		e.refs++
	}
	return e, nil
}

func (d *Discovery) removeLocked(e *entry) {
	if e.removed {
		return
	}
	e.removed = true
	if d.entries[e.name] == e {
		delete(d.entries, e.name)
	}
}

// unsubscribeAsync lets go of e's view: its follow goroutine returns and
// the Manager ends the shared subscription in the background if e held
// the last share (Close waits for that). It never blocks on the registry.
func (d *Discovery) unsubscribeAsync(e *entry) {
	close(e.quit)
	_ = e.v.Close()
	d.unsubscribes.Add(1)
	d.log.Info("unsubscribed", zap.String("service", e.name))
}

// follow reads e's view until the Discovery lets go of it, handing each
// new list to deliver (the latest, should lists come faster than they
// are converted), and records a stop for good.
func (d *Discovery) follow(e *entry) {
	defer d.wg.Done()
	var last []subscriber.Instance
	has := false
	for {
		select {
		case <-e.quit:
			return
		case <-e.v.Changed():
		}
		s := e.v.Snapshot()
		if s.HasList && (!has || !sameSlice(last, s.List)) {
			last, has = s.List, true
			d.deliver(e, s.List)
		}
		if s.Stopped != nil {
			e.stopErr = s.Stopped
			close(e.stopped)
			d.log.Warn("subscription stopped", zap.String("service", e.name), zap.Error(s.Stopped))
			return
		}
	}
}

// sameSlice reports whether a and b are the same list (the view hands
// out one shared slice per list).
func sameSlice(a, b []subscriber.Instance) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// deliver hands a new list to e's watchers (from e's follow goroutine,
// never concurrent with itself).
func (d *Discovery) deliver(e *entry, list []subscriber.Instance) {
	conv := d.convert(e, list)
	if len(conv) == 0 && len(list) > 0 {
		d.log.Warn("every instance is left out (kratos gets an empty list)", zap.String("service", e.name),
			zap.String("why", subscriber.FilteredOut(subscriber.Key{}, list)+" (healthy, enabled and weight > 0 are kept)"))
	}
	d.mu.Lock()
	if e.removed {
		d.mu.Unlock()
		return
	}
	e.list = conv
	first := !e.hasList
	e.hasList = true
	var wake []*watcher
	for w := range e.watchers {
		w.pushLocked(conv)
		wake = append(wake, w)
	}
	d.mu.Unlock()
	if first {
		close(e.ready)
	}
	for _, w := range wake {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// convert builds kratos' list from the Manager's, reusing the
// ServiceInstance of every instance that did not change (both lists are
// sorted by IP, Port, Cluster and ID).
func (d *Discovery) convert(e *entry, list []subscriber.Instance) []*registry.ServiceInstance {
	out := make([]*registry.ServiceInstance, 0, len(list))
	conv := e.spare[:0]
	if cap(conv) < len(list) {
		conv = make([]*registry.ServiceInstance, len(list))
	}
	conv = conv[:len(list)]
	clear(conv)
	j := 0
	for i, in := range list {
		for j < len(e.prev) && compareInst(e.prev[j], in) < 0 {
			j++
		}
		if j < len(e.prev) && sameInst(e.prev[j], in) {
			conv[i] = e.prevConv[j]
		} else if si, ok := d.decode(e.name, in); ok {
			conv[i] = si
		}
		if conv[i] != nil {
			out = append(out, conv[i])
		}
	}
	e.prev, e.prevConv, e.spare = list, conv, e.prevConv
	return out
}

func compareInst(a, b subscriber.Instance) int {
	return cmp.Or(strings.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port),
		strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.ID, b.ID))
}

func sameInst(a, b subscriber.Instance) bool {
	return a.ID == b.ID && a.IP == b.IP && a.Port == b.Port && a.Weight == b.Weight &&
		a.Healthy == b.Healthy && a.Enabled == b.Enabled && a.Ephemeral == b.Ephemeral &&
		a.Cluster == b.Cluster && maps.Equal(a.Metadata, b.Metadata)
}

// GetService returns name's current instances from memory. The first call
// for a name that no watcher holds subscribes to it (the subscription is
// kept until Close) and waits, bounded by ctx, for its first list; every
// later call answers from the Manager's current list without a registry
// request and without allocating. The slice and the ServiceInstances in
// it are shared, like the lists the Manager hands its listeners: callers
// must not modify them (appending to the slice copies it; use
// slices.Clone to sort or filter in place; note that kratos'
// ServiceInstance.Equal sorts the Endpoints of both instances in place).
//
// Errors: a *rebound.ArgumentError for a nil ctx or an empty name,
// ErrClosed after Close (also to a call waiting for the first list when
// Close is called), ctx's error (wrapping the registry's last error,
// if any) when ctx ends before the first list, the subscription's error
// when it stopped for good (Manager closed, permanent registry error).
func (d *Discovery) GetService(ctx context.Context, serviceName string) ([]*registry.ServiceInstance, error) {
	if ctx == nil {
		return nil, &rebound.ArgumentError{Func: "reboundkratos.Discovery.GetService", Arg: "ctx", Reason: "is nil"}
	}
	d.mu.Lock()
	if e := d.entries[serviceName]; e != nil && e.hasList && e.pinned && !d.closed {
		select {
		case <-e.stopped: // stopped for good: acquireLocked starts again
		default:
			list := e.list[:len(e.list):len(e.list)]
			d.mu.Unlock()
			return list, nil
		}
	}
	d.mu.Unlock()
	e, err := d.lockAcquire("GetService", serviceName, true)
	if err != nil {
		return nil, err
	}
	d.mu.Unlock()
	select {
	case <-e.ready:
	case <-e.stopped:
		return nil, fmt.Errorf("reboundkratos: GetService %q: subscription stopped: %w", serviceName, e.stopErr)
	case <-e.quit: // the Discovery let go of the name (Close; a stop, reported by e.stopped)
		select {
		case <-e.stopped:
			return nil, fmt.Errorf("reboundkratos: GetService %q: subscription stopped: %w", serviceName, e.stopErr)
		case <-e.ready:
		default:
			return nil, fmt.Errorf("reboundkratos: GetService %q: %w", serviceName, ErrClosed)
		}
	case <-ctx.Done():
		if last := e.v.Snapshot().Unresolved; last != nil {
			return nil, fmt.Errorf("reboundkratos: GetService %q: no instance list yet: %w (registry: %w)", serviceName, ctx.Err(), last)
		}
		return nil, fmt.Errorf("reboundkratos: GetService %q: no instance list yet: %w", serviceName, ctx.Err())
	}
	d.mu.Lock()
	list := e.list[:len(e.list):len(e.list)]
	d.mu.Unlock()
	return list, nil
}

// Watch returns a watcher of name's instance list. It returns at once:
// it never waits for the registry and never fails because the registry
// is down. The watcher's first Next returns the current list (waiting for
// the Manager's first list if there is none yet, as kratos' contract
// says); every later Next returns the next change, once and in order:
// lists the Manager delivers while the Discovery is still converting the
// previous one coalesce to the newest (the name's view keeps only the
// latest), so a watcher may skip one but never gets an older list after a
// newer one, nor one twice (see WithMaxPending for a watcher that is not
// read). An empty list is returned like any other
// (kratos' resolvers then keep their old addresses); the Manager's
// empty-list hold and last-known-good lists apply as configured on it.
//
// The watcher ends with Stop or when ctx ends; either releases its share
// of the subscription.
//
// Errors: a *rebound.ArgumentError for a nil ctx, an empty name or a key
// the name maps to that the Manager rejects; ErrClosed after Close;
// ctx's error if it is done; an error wrapping subscriber.ErrManagerClosed
// when the Manager is closed.
func (d *Discovery) Watch(ctx context.Context, serviceName string) (registry.Watcher, error) {
	if ctx == nil {
		return nil, &rebound.ArgumentError{Func: "reboundkratos.Discovery.Watch", Arg: "ctx", Reason: "is nil"}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reboundkratos: Watch %q: %w", serviceName, err)
	}
	w := &watcher{d: d, parent: ctx, wake: make(chan struct{}, 1), max: d.o.maxPending}
	w.ctx, w.cancel = context.WithCancel(ctx)
	e, err := d.lockAcquire("Watch", serviceName, false)
	if err != nil {
		w.cancel()
		return nil, err
	}
	w.e = e
	e.watchers[w] = struct{}{}
	if e.hasList {
		w.pushLocked(e.list)
	}
	// Set under d.mu: release, which reads it, takes d.mu too.
	w.stopAfter = context.AfterFunc(ctx, func() { w.release() })
	d.mu.Unlock()
	return w, nil
}

// Close stops every watcher (their Next returns ErrWatcherStopped), ends
// every subscription of the Discovery and waits for the unsubscriptions.
// Watch and GetService return ErrClosed afterwards. Close is idempotent
// and returns nil (unsubscribe errors are logged).
func (d *Discovery) Close() error {
	d.mu.Lock()
	var list []*entry
	var ws []*watcher
	if !d.closed {
		d.closed = true
		stop := func(e *entry) {
			for w := range e.watchers {
				w.stopped = true
				w.queue, w.head = nil, 0
				ws = append(ws, w)
			}
			e.watchers = nil
		}
		for _, e := range d.entries {
			list = append(list, e)
			stop(e)
			d.removeLocked(e)
		}
		for e := range d.retired {
			stop(e)
		}
		d.retired = nil
	}
	d.mu.Unlock()
	for _, w := range ws {
		w.cancel()
		w.stopAfter()
	}
	for _, e := range list {
		d.unsubscribeAsync(e)
	}
	d.wg.Wait()
	_ = d.views.Close() // waits for the subscriptions it held the last share of
	return nil
}

// watcher is one registry.Watcher.
type watcher struct {
	d         *Discovery
	e         *entry
	parent    context.Context // Watch's ctx
	ctx       context.Context // parent's child, cancelled by Stop
	cancel    context.CancelFunc
	stopAfter func() bool
	wake      chan struct{}
	max       int

	// guarded by Discovery.mu
	stopped bool
	queue   [][]*registry.ServiceInstance
	head    int
}

func (w *watcher) pushLocked(l []*registry.ServiceInstance) {
	if len(w.queue)-w.head >= w.max {
		w.queue[w.head] = nil
		w.head++ // the oldest pending list is dropped
	}
	if w.head > 0 && len(w.queue) == cap(w.queue) {
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	w.queue = append(w.queue, l)
}

func (w *watcher) popLocked() ([]*registry.ServiceInstance, bool) {
	if w.head == len(w.queue) {
		return nil, false
	}
	l := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	if w.head == len(w.queue) {
		w.queue, w.head = w.queue[:0], 0
	}
	return l, true
}

// Next implements registry.Watcher: it returns the next list (the current
// one first), blocking until there is one. The slice is the caller's; the
// ServiceInstances in it are shared and must not be modified (nor passed
// to kratos' ServiceInstance.Equal, which sorts Endpoints in place). It returns
// an error only when the watcher is stopped (ErrWatcherStopped) or its
// ctx ended (an error wrapping ctx's error). A subscription that stops
// for good (the Manager closed, a key the registry can never accept)
// delivers nothing more: Next keeps blocking, and kratos keeps its last
// addresses, until Stop or ctx.
func (w *watcher) Next() ([]*registry.ServiceInstance, error) {
	for {
		if err := w.parent.Err(); err != nil {
			return nil, fmt.Errorf("reboundkratos: watch %q: %w", w.e.name, err)
		}
		w.d.mu.Lock()
		if w.stopped {
			w.d.mu.Unlock()
			return nil, ErrWatcherStopped
		}
		l, ok := w.popLocked()
		w.d.mu.Unlock()
		if ok {
			return slices.Clone(l), nil
		}
		select {
		case <-w.wake:
		case <-w.ctx.Done():
		}
	}
}

// Stop implements registry.Watcher: it ends the watcher (a blocked Next
// returns ErrWatcherStopped) and releases its share of the subscription;
// the last share ends the subscription, in the background. It never
// blocks, is idempotent and returns nil.
func (w *watcher) Stop() error {
	w.release()
	return nil
}

func (w *watcher) release() {
	d, e := w.d, w.e
	d.mu.Lock()
	if w.stopped {
		d.mu.Unlock()
		return
	}
	w.stopped = true
	w.queue, w.head = nil, 0
	delete(e.watchers, w)
	if len(e.watchers) == 0 {
		delete(d.retired, e)
	}
	e.refs--
	last := e.refs == 0 && !e.removed
	if last {
		d.removeLocked(e)
	}
	stopAfter := w.stopAfter
	d.mu.Unlock()
	w.cancel()
	stopAfter()
	if last {
		d.unsubscribeAsync(e)
	}
}
