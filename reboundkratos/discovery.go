package reboundkratos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-kratos/kratos/v2/registry"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
	"github.com/rebound-go/rebound/subscriber"
)

// ErrClosed is returned by Watch and GetService after Discovery.Close,
// and by Register after Registrar.Close. It matches rebound.ErrClosed.
var ErrClosed = closed.New("reboundkratos: closed")

// errWatcherStopped is returned by Next after Stop (or after the
// Discovery was closed). It matches rebound.ErrClosed and
// context.Canceled, so kratos' resolvers end their watch loop on it
// instead of retrying it every second.
var errWatcherStopped error = stoppedError{}

type stoppedError struct{}

func (stoppedError) Error() string { return "reboundkratos: watcher stopped" }
func (stoppedError) Is(target error) bool {
	return target == rebound.ErrClosed || target == context.Canceled
}

// Discovery is a kratos registry.Discovery over a subscriber.Manager: pass
// it to kratos' clients and dial "discovery:///<name>". It is safe for
// concurrent use. Close the kratos clients, then the Discovery, then the
// Manager.
type Discovery struct {
	m     *subscriber.Manager
	f     Format
	o     discoveryOptions
	log   *zap.Logger
	views *subscriber.WatchGroup // every View of the Discovery
	done  chan struct{}          // closed by Close
	wg    sync.WaitGroup         // the watchers' goroutines

	mu       sync.Mutex
	closed   bool
	pins     map[string]*pin // GetService's views, kept until Close once one served a list
	watchers map[*watcher]struct{}
}

// NewDiscovery returns a Discovery over m reading instances stored in
// format f. A nil m, an unknown f or a bad option is a
// *rebound.ArgumentError; a closed m's error matches rebound.ErrClosed.
func NewDiscovery(m *subscriber.Manager, f Format, opts ...Option) (*Discovery, error) {
	o := discoveryOptions{kind: defaultKind, maxPending: defaultMaxPending}
	if m == nil {
		o.bad("NewDiscovery", "m", "is nil (a *subscriber.Manager is required)")
	}
	if !f.valid() {
		o.bad("NewDiscovery", "f", "must be FormatNacos or FormatEtcd; got "+f.name())
	}
	applyOptions(&config{fn: "NewDiscovery", d: &o}, opts)
	if f == FormatEtcd && o.group != "" {
		o.bad("NewDiscovery", "opts", "WithGroup does not apply to FormatEtcd (its keys have no group)")
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	views, err := m.NewWatchGroup(0, 0)
	if err != nil {
		return nil, fmt.Errorf("reboundkratos.NewDiscovery: %w", err)
	}
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	return &Discovery{m: m, f: f, o: o, log: log.With(zap.String("component", "reboundkratos")), views: views,
		done: make(chan struct{}), pins: make(map[string]*pin), watchers: make(map[*watcher]struct{})}, nil
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
	return subscriber.Key{Group: d.o.group, Service: name}, nil
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

// view opens a View of name's key (computed with no lock held).
func (d *Discovery) view(fn, name string) (subscriber.Key, *subscriber.View, error) {
	key, err := d.key(fn, name)
	if err != nil {
		return key, nil, err
	}
	v, err := d.views.Watch(key)
	if err != nil {
		select {
		case <-d.done: // the group's Close: the Discovery's
			if errors.Is(err, rebound.ErrClosed) {
				err = ErrClosed
			}
		default:
		}
		return key, nil, fmt.Errorf("reboundkratos: subscribe %q: %w", name, err)
	}
	return key, v, nil
}

// converter turns the Manager's lists into kratos' form, reusing the
// ServiceInstance of every instance that did not change (both lists are
// sorted by IP, Port, Cluster and ID). It is its owner's alone.
type converter struct {
	d     *Discovery
	name  string
	src   []subscriber.Instance       // the view's list converted last (shared, not a copy)
	conv  []*registry.ServiceInstance // what each of src became; nil: left out
	spare []*registry.ServiceInstance // the buffer convert fills next
}

func (c *converter) convert(list []subscriber.Instance) []*registry.ServiceInstance {
	out := make([]*registry.ServiceInstance, 0, len(list))
	conv := c.spare[:0]
	if cap(conv) < len(list) {
		conv = make([]*registry.ServiceInstance, len(list))
	}
	conv = conv[:len(list)]
	clear(conv)
	j := 0
	for i, in := range list {
		for j < len(c.src) && compareInst(c.src[j], in) < 0 {
			j++
		}
		if j < len(c.src) && sameInst(c.src[j], in) {
			conv[i] = c.conv[j]
		} else if si, ok := c.d.decode(c.name, in); ok {
			conv[i] = si
		}
		if conv[i] != nil {
			out = append(out, conv[i])
		}
	}
	c.src, c.conv, c.spare = list, conv, c.conv
	if len(out) == 0 && len(list) > 0 {
		c.d.log.Warn("every instance is left out (kratos gets an empty list)", zap.String("service", c.name),
			zap.String("why", subscriber.FilteredOut(subscriber.Key{}, list)+" (healthy, enabled and weight > 0 are kept)"))
	}
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

// pin is GetService's View of one name and its last conversion.
type pin struct {
	key    subscriber.Key
	v      *subscriber.View
	calls  int         // GetService calls using it now (under Discovery.mu)
	served atomic.Bool // a call returned a list of it

	mu   sync.Mutex
	seen uint64 // the version converted
	out  []*registry.ServiceInstance
	conv converter
}

// current returns the name's list; ok is false before the first list.
func (p *pin) current() (list []*registry.ServiceInstance, ok bool, err error) {
	s := p.v.Snapshot()
	if s.Stopped != nil {
		return nil, true, fmt.Errorf("reboundkratos: GetService %q: subscription stopped: %w", p.conv.name, s.Stopped)
	}
	if !s.HasList {
		return nil, false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.NewList(p.seen) {
		p.out = p.conv.convert(s.List)
	}
	p.seen = max(p.seen, s.Version)
	p.served.Store(true)
	return p.out[:len(p.out):len(p.out)], true, nil
}

// GetService returns name's current instances from memory. The first call
// for a name waits, bounded by ctx, for the first list; once one was
// returned the name stays subscribed until Close. The result is shared: do
// not modify it.
func (d *Discovery) GetService(ctx context.Context, serviceName string) ([]*registry.ServiceInstance, error) {
	if ctx == nil {
		return nil, &rebound.ArgumentError{Func: "reboundkratos.Discovery.GetService", Arg: "ctx", Reason: "is nil"}
	}
	p, err := d.pin(serviceName)
	if err != nil {
		return nil, err
	}
	l, err := d.getService(ctx, serviceName, p)
	d.unpin(serviceName, p, err != nil)
	return l, err
}

// getService returns p's list, waiting for the first one.
func (d *Discovery) getService(ctx context.Context, serviceName string, p *pin) ([]*registry.ServiceInstance, error) {
	if l, ok, err := p.current(); ok || err != nil {
		return l, err
	}
	// A View of its own: concurrent callers do not share one signal.
	tv, err := d.views.Watch(p.key)
	if err != nil {
		return nil, fmt.Errorf("reboundkratos: GetService %q: %w", serviceName, ErrClosed)
	}
	defer tv.Close()
	for {
		if l, ok, err := p.current(); ok || err != nil {
			return l, err
		}
		select {
		case <-tv.Changed():
		case <-d.done:
			return nil, fmt.Errorf("reboundkratos: GetService %q: %w", serviceName, ErrClosed)
		case <-ctx.Done():
			if last := tv.Snapshot().Unresolved; last != nil {
				return nil, fmt.Errorf("reboundkratos: GetService %q: no instance list yet: %w (registry: %w)", serviceName, ctx.Err(), last)
			}
			return nil, fmt.Errorf("reboundkratos: GetService %q: no instance list yet: %w", serviceName, ctx.Err())
		}
	}
}

// pin returns name's pin, opening it, or opening it again once its
// subscription stopped for good, counted as used until unpin.
func (d *Discovery) pin(name string) (*pin, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	old := d.pins[name]
	if old != nil && old.v.Snapshot().Stopped == nil {
		old.calls++
		d.mu.Unlock()
		return old, nil
	}
	d.mu.Unlock()
	key, v, err := d.view("GetService", name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	cur := d.pins[name]
	switch {
	case d.closed:
		d.mu.Unlock()
		_ = v.Close()
		return nil, ErrClosed
	case cur != old && cur != nil: // another call pinned it meanwhile
		cur.calls++
		d.mu.Unlock()
		_ = v.Close()
		return cur, nil
	}
	p := &pin{key: key, v: v, calls: 1, conv: converter{d: d, name: name}}
	d.pins[name] = p
	d.mu.Unlock()
	if old != nil {
		_ = old.v.Close()
	}
	return p, nil
}

// unpin ends a call's use of p. After a failed call, the last call using
// p closes it if it never served a list or its subscription stopped for
// good: a failed call leaves nothing held behind.
func (d *Discovery) unpin(name string, p *pin, failed bool) {
	d.mu.Lock()
	p.calls--
	drop := failed && p.calls == 0 && d.pins[name] == p &&
		(!p.served.Load() || p.v.Snapshot().Stopped != nil)
	if drop {
		delete(d.pins, name)
	}
	d.mu.Unlock()
	if drop {
		_ = p.v.Close()
	}
}

// Watch returns a watcher of name's instance list at once, whatever the
// registry's state. Next returns the current list, then newer ones, in
// order and never twice (the last always arrives). After Stop, Close or
// ctx's end, Next returns an error matching context.Canceled.
func (d *Discovery) Watch(ctx context.Context, serviceName string) (registry.Watcher, error) {
	if ctx == nil {
		return nil, &rebound.ArgumentError{Func: "reboundkratos.Discovery.Watch", Arg: "ctx", Reason: "is nil"}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reboundkratos: Watch %q: %w", serviceName, err)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	_, v, err := d.view("Watch", serviceName)
	if err != nil {
		return nil, err
	}
	w := &watcher{d: d, name: serviceName, v: v, parent: ctx, wake: make(chan struct{}, 1), max: d.o.maxPending,
		conv: converter{d: d, name: serviceName}}
	w.ctx, w.cancel = context.WithCancel(ctx)
	if s := v.Snapshot(); s.HasList { // the first Next answers at once
		w.seen = s.Version
		w.deliver(s.List)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		w.cancel()
		_ = v.Close()
		return nil, ErrClosed
	}
	d.watchers[w] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	go w.follow()
	w.mu.Lock()
	w.stopAfter = context.AfterFunc(ctx, w.release) // release reads it under w.mu
	w.mu.Unlock()
	return w, nil
}

// Close stops every watcher and lets go of every View. Watch and
// GetService return ErrClosed afterwards. It is idempotent and returns nil.
func (d *Discovery) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	ws, ps := d.watchers, d.pins
	d.watchers, d.pins = nil, nil
	d.mu.Unlock()
	for w := range ws {
		w.release()
	}
	for _, p := range ps {
		_ = p.v.Close()
	}
	d.wg.Wait()
	_ = d.views.Close() // waits for the subscriptions it held the last share of
	return nil
}

// watcher is one registry.Watcher: its own View, and a goroutine that
// converts each new list and queues it for Next.
type watcher struct {
	d      *Discovery
	name   string
	v      *subscriber.View
	parent context.Context // Watch's ctx
	ctx    context.Context // parent's child, cancelled by Stop
	cancel context.CancelFunc
	wake   chan struct{}
	max    int
	seen   uint64    // the version converted last (follow's own)
	conv   converter // follow's own

	mu        sync.Mutex
	stopAfter func() bool
	stopped   bool
	queue     [][]*registry.ServiceInstance
	head      int
}

// follow reads the watcher's View until Stop, converting each new list.
func (w *watcher) follow() {
	defer w.d.wg.Done()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.v.Changed():
		}
		s := w.v.Snapshot()
		fresh := s.NewList(w.seen)
		w.seen = s.Version
		if fresh {
			w.deliver(s.List)
		}
		if s.Stopped != nil {
			w.d.log.Warn("subscription stopped", zap.String("service", w.name), zap.Error(s.Stopped))
			return
		}
	}
}

// deliver converts list and queues it for Next.
func (w *watcher) deliver(list []subscriber.Instance) {
	conv := w.conv.convert(list)
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.pushLocked(conv)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
// one first), blocking until there is one. The slice is the caller's; its
// ServiceInstances are shared and must not be modified. It fails only
// after Stop (errWatcherStopped) or when ctx ends. After a stop for good
// of the subscription it blocks until Stop or ctx.
func (w *watcher) Next() ([]*registry.ServiceInstance, error) {
	for {
		if err := w.parent.Err(); err != nil {
			return nil, fmt.Errorf("reboundkratos: watch %q: %w", w.name, err)
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return nil, errWatcherStopped
		}
		l, ok := w.popLocked()
		w.mu.Unlock()
		if ok {
			return l, nil
		}
		select {
		case <-w.wake:
		case <-w.ctx.Done():
		}
	}
}

// Stop implements registry.Watcher: it ends the watcher (a blocked Next
// returns errWatcherStopped) and closes its View. It never blocks, is
// idempotent and returns nil.
func (w *watcher) Stop() error {
	w.release()
	return nil
}

func (w *watcher) release() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.queue, w.head = nil, 0
	stopAfter := w.stopAfter
	w.mu.Unlock()
	w.cancel()
	if stopAfter != nil {
		stopAfter()
	}
	_ = w.v.Close()
	w.d.mu.Lock()
	delete(w.d.watchers, w)
	w.d.mu.Unlock()
}
