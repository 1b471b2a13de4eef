package reboundgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/subscriber"
)

// ErrClosed is returned by Build after Close. It matches rebound.ErrClosed.
var ErrClosed = rebound.NewClosedError("reboundgrpc: builder closed")

// ErrNoInstances is wrapped by the error a ClientConn receives through
// ReportError when the registry lists no instance that passes the filter.
var ErrNoInstances = errors.New("reboundgrpc: no instances")

// ErrUnresolved is wrapped by the error a ClientConn receives through
// ReportError while its subscription has not delivered a first list and
// the registry answered with an error (see WithUnresolvedReport).
var ErrUnresolved = errors.New("reboundgrpc: no instance list yet")

// maxUnresolvedReport caps the doubling interval of unresolved reports.
const maxUnresolvedReport = 30 * time.Second

// Builder is a grpc-go resolver.Builder over a subscriber.Manager: pass it
// to grpc.NewClient with grpc.WithResolvers and dial targets of its scheme
// (see ParseTarget). Every ClientConn, and every resolver a ClientConn
// builds again after leaving idle mode, that names the same Key shares one
// Manager subscription, reference-counted (see WithLinger).
//
// Create it with NewBuilder; the zero Builder is not usable. It is safe for
// concurrent use. It does not own the Manager. Close it after the
// ClientConns that use it and before the Manager.
type Builder struct {
	m     *subscriber.Manager
	o     options
	log   *zap.Logger
	retry *rebound.Retrier // the resend loops' step function, one Schedule per run
	meter *telemetry.GRPC

	wg sync.WaitGroup // every goroutine and pending timer callback of the Builder

	mu      sync.Mutex
	closed  bool
	entries map[subscriber.KeyID]*entry // by the Key's value, never its printed form

	subscribes, unsubscribes, builds, resolveNows, refreshes atomic.Uint64
	rejected, panics                                         atomic.Uint64
}

// Stats counts what a Builder did, for tests and dashboards.
type Stats struct {
	// Subscriptions is the number of Manager subscriptions the Builder
	// holds now (one per Key in use or lingering).
	Subscriptions int
	// Resolvers is the number of resolvers open now.
	Resolvers int
	// Subscribes and Unsubscribes count Manager.Subscribe and
	// Subscription.Unsubscribe calls since NewBuilder.
	Subscribes, Unsubscribes uint64
	// Builds counts Build calls that returned a resolver.
	Builds uint64
	// ResolveNows counts ResolveNow calls; Refreshes the re-confirmations
	// they led to after coalescing (see WithResolveNowInterval).
	ResolveNows, Refreshes uint64
	// Rejected counts states a ClientConn rejected (UpdateState errors),
	// each sent again with backoff. An empty list is not counted.
	Rejected uint64
	// Panics counts recovered panics of the WithFilter function and of
	// the WithObserver observers (each logged at Error with its stack).
	Panics uint64
}

// entry is one shared subscription.
type entry struct {
	key subscriber.Key
	id  subscriber.KeyID
	sub *subscriber.Subscription

	// buildMu serializes the filtering of the entry's lists (run outside
	// Builder.mu, so that a slow filter only delays its own key); it is
	// taken before Builder.mu, never after.
	buildMu sync.Mutex

	// guarded by Builder.mu
	removed   bool
	resolvers map[*ccResolver]struct{}
	linger    *time.Timer
	version   uint64 // bumped by every list and error
	hasList   bool
	list      []subscriber.Instance
	built     uint64 // version state was built for
	state     resolver.State
	filtered  int
	good      bool  // state was built by a filter that returned (no panic)
	filterErr error // the filter panicked on the list of version built
	err       error // unresolved or stopped
	stopped   bool

	lastRefresh  time.Time
	refreshTimer *time.Timer
}

// NewBuilder returns a Builder over m. It returns a *rebound.ArgumentError
// (matching rebound.ErrInvalidArgument) for a nil m or a bad option, and
// an error wrapping subscriber.ErrManagerClosed (matching rebound.ErrClosed)
// if m is closed already (Close or Shutdown has begun): its ClientConns
// could never resolve.
// Defaults: scheme DefaultScheme, linger DefaultLinger, DefaultFilter, the
// zero rebound.Policy for re-sending rejected states, ResolveNow coalesced
// to one re-confirmation per DefaultResolveNowInterval, unresolved reports
// from DefaultUnresolvedReport, no logging.
func NewBuilder(m *subscriber.Manager, opts ...Option) (*Builder, error) {
	o := options{
		scheme:     DefaultScheme,
		linger:     DefaultLinger,
		filter:     DefaultFilter,
		rnInterval: DefaultResolveNowInterval,
		unresolved: DefaultUnresolvedReport,
	}
	if m == nil {
		o.bad("NewBuilder", "m", "is nil (a *subscriber.Manager is required)")
	}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	if m.Closed() {
		return nil, fmt.Errorf("reboundgrpc.NewBuilder: %w", subscriber.ErrManagerClosed)
	}
	var meter rebound.Option
	if o.mp != nil {
		meter = rebound.WithMeterProvider(o.mp, attribute.String("component", "reboundgrpc"))
	}
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	b := &Builder{
		m:       m,
		o:       o,
		log:     log.With(zap.String("component", "reboundgrpc")),
		entries: make(map[subscriber.KeyID]*entry),
	}
	ropts := []rebound.Option{meter}
	for _, ob := range o.observers {
		ropts = append(ropts, rebound.WithObserver(safeObserver{b, ob}))
	}
	retry, err := rebound.NewRetrier(o.policy, ropts...)
	if err != nil {
		return nil, err
	}
	b.retry = retry
	b.meter, err = telemetry.NewGRPC(o.mp, func() telemetry.GRPCStats {
		st := b.Stats()
		return telemetry.GRPCStats{Subscriptions: int64(st.Subscriptions), Resolvers: int64(st.Resolvers),
			ResolveNows: int64(st.ResolveNows), Refreshes: int64(st.Refreshes), Rejected: int64(st.Rejected)}
	})
	if err != nil {
		return nil, &rebound.ArgumentError{Func: "reboundgrpc.WithMeterProvider", Arg: "mp", Reason: "could not create the instruments", Err: err}
	}
	return b, nil
}

// Scheme returns the scheme of the targets the Builder resolves.
func (b *Builder) Scheme() string { return b.o.scheme }

// Build implements resolver.Builder. It never blocks on the registry and
// never fails because the registry is down: it attaches the ClientConn to
// the target's shared subscription (starting one through Manager.Subscribe,
// which returns at once, if there is none) and returns. The ClientConn gets
// the subscription's last list at once if there is one, and every later
// list as it arrives; until the first list RPCs wait (fail-fast RPCs fail
// with Unavailable once the registry's error is reported, see
// WithUnresolvedReport).
//
// It returns an error for a target ParseTarget rejects, after Close
// (ErrClosed), and when the Manager refuses the subscription (closed).
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	key, err := keyFromTarget(target)
	if err != nil {
		return nil, err
	}
	r := &ccResolver{b: b, cc: cc, wake: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		r.cancel()
		return nil, ErrClosed
	}
	id := key.ID()
	e := b.entries[id]
	if e == nil {
		e = &entry{key: key, id: id, resolvers: make(map[*ccResolver]struct{})}
		// Subscribe returns at once; the listener runs on the
		// subscription's delivery goroutine, which may call it before
		// Subscribe returns: it waits for b.mu, so e.sub is set first.
		sub, err := b.m.Subscribe(context.Background(), key, func(l []subscriber.Instance) { b.deliver(e, l) })
		if err != nil {
			b.mu.Unlock()
			r.cancel()
			return nil, fmt.Errorf("reboundgrpc: subscribe %s: %w", keyName(key), err)
		}
		e.sub = sub
		b.entries[id] = e
		b.subscribes.Add(1)
		b.wg.Add(1)
		go b.watch(e)
		b.log.Info("subscribed", zap.Stringer("key", key))
	} else if e.linger != nil {
		if e.linger.Stop() {
			b.wg.Done() // the callback will not run
		}
		e.linger = nil
	}
	r.e = e
	e.resolvers[r] = struct{}{}
	notify := e.version > 0
	b.mu.Unlock()
	b.builds.Add(1)
	if notify {
		r.notify()
	}
	return r, nil
}

// Close unsubscribes every subscription of the Builder and waits for its
// goroutines. Resolvers still open keep the last state they sent to their
// ClientConn and get no further update: close the ClientConns first. Build
// returns ErrClosed afterwards. Close is idempotent and always returns nil
// (Unsubscribe errors are logged).
func (b *Builder) Close() error {
	b.mu.Lock()
	var list []*entry
	first := !b.closed
	if first {
		b.closed = true
		for _, e := range b.entries {
			list = append(list, e)
			b.removeLocked(e)
		}
	}
	b.mu.Unlock()
	for _, e := range list {
		b.unsubscribe(e)
	}
	b.wg.Wait()
	if first {
		_ = b.meter.Close()
	}
	return nil
}

// Stats returns the Builder's counters.
func (b *Builder) Stats() Stats {
	b.mu.Lock()
	subs := len(b.entries)
	res := 0
	for _, e := range b.entries {
		res += len(e.resolvers)
	}
	b.mu.Unlock()
	return Stats{
		Subscriptions: subs,
		Resolvers:     res,
		Subscribes:    b.subscribes.Load(),
		Unsubscribes:  b.unsubscribes.Load(),
		Builds:        b.builds.Load(),
		ResolveNows:   b.resolveNows.Load(),
		Refreshes:     b.refreshes.Load(),
		Rejected:      b.rejected.Load(),
		Panics:        b.panics.Load(),
	}
}

// removeLocked takes e out of the map and stops its timers.
func (b *Builder) removeLocked(e *entry) {
	if e.removed {
		return
	}
	e.removed = true
	if b.entries[e.id] == e {
		delete(b.entries, e.id)
	}
	if e.linger != nil {
		if e.linger.Stop() {
			b.wg.Done()
		}
		e.linger = nil
	}
	if e.refreshTimer != nil {
		if e.refreshTimer.Stop() {
			b.wg.Done()
		}
		e.refreshTimer = nil
	}
}

func (b *Builder) unsubscribe(e *entry) {
	b.unsubscribes.Add(1)
	if err := e.sub.Unsubscribe(); err != nil {
		b.log.Warn("unsubscribe failed", zap.Stringer("key", e.key), zap.Error(err))
	} else {
		b.log.Info("unsubscribed", zap.Stringer("key", e.key))
	}
}

// deliver is the subscription's Listener.
func (b *Builder) deliver(e *entry, list []subscriber.Instance) {
	b.mu.Lock()
	if e.removed {
		b.mu.Unlock()
		return
	}
	e.list, e.hasList = list, true
	e.err = nil
	e.version++
	rs := e.snapshotLocked()
	b.mu.Unlock()
	for _, r := range rs {
		r.notify()
	}
}

func (e *entry) snapshotLocked() []*ccResolver {
	rs := make([]*ccResolver, 0, len(e.resolvers))
	for r := range e.resolvers {
		rs = append(rs, r)
	}
	return rs
}

// watch follows the subscription: it reports the registry's error to
// ClientConns waiting for a first list, and notices a subscription that
// stopped for good (Manager closed, permanent registry error).
func (b *Builder) watch(e *entry) {
	defer b.wg.Done()
	var tick <-chan time.Time
	d := b.o.unresolved
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tick = t.C
		ready := e.sub.Ready()
		for tick != nil {
			select {
			case <-ready:
				tick = nil
			case <-e.sub.Done():
				b.stopped(e)
				return
			case <-tick:
				st := e.sub.Status()
				if st.State == subscriber.StateRetrying && st.LastErr != nil {
					b.setErr(e, fmt.Errorf("%w for %s: %w", ErrUnresolved, keyName(e.key), st.LastErr), false)
				}
				d = min(2*d, maxUnresolvedReport)
				t.Reset(d)
			}
		}
	}
	<-e.sub.Done()
	b.stopped(e)
}

func (b *Builder) stopped(e *entry) {
	err := e.sub.Err()
	if errors.Is(err, subscriber.ErrUnsubscribed) {
		return // ours
	}
	b.mu.Lock()
	b.removeLocked(e)
	b.mu.Unlock()
	b.log.Warn("subscription stopped", zap.Stringer("key", e.key), zap.Error(err))
	b.setErr(e, fmt.Errorf("reboundgrpc: subscription %s stopped: %w", keyName(e.key), err), true)
}

// setErr records an error for the entry's resolvers. An unresolved error
// only reaches resolvers while there is no list.
func (b *Builder) setErr(e *entry, err error, stopped bool) {
	b.mu.Lock()
	if !stopped && (e.hasList || e.removed) {
		b.mu.Unlock()
		return
	}
	e.err, e.stopped = err, stopped
	e.version++
	rs := e.snapshotLocked()
	b.mu.Unlock()
	for _, r := range rs {
		r.notify()
	}
}

// view is what a resolver sends.
type view struct {
	version   uint64
	hasList   bool
	state     resolver.State
	good      bool // state comes from a list the filter accepted
	filtered  int
	total     int
	err       error
	stopped   bool
	filterErr error // the filter panicked on the latest list
}

// view returns what the entry's resolvers send. The filter runs outside
// b.mu (under the entry's buildMu, once per list for all resolvers of the
// entry): a slow filter delays only its own key, and a filter may call
// Stats. A filter that panics leaves the last good state in place (see
// filterPanicked).
func (b *Builder) view(e *entry) view {
	e.buildMu.Lock()
	defer e.buildMu.Unlock()
	b.mu.Lock()
	if e.hasList && e.built != e.version {
		list, version := e.list, e.version
		b.mu.Unlock()
		st, filtered, perr := b.filter(list)
		b.mu.Lock()
		e.built = version
		if perr != nil {
			e.filterErr = perr
		} else {
			e.state, e.filtered, e.good, e.filterErr = st, filtered, true, nil
		}
		if perr != nil {
			defer b.filterPanicked(e, perr) // logged after b.mu is released
		}
	}
	defer b.mu.Unlock()
	return view{version: e.version, hasList: e.hasList, state: e.state, good: e.good, filtered: e.filtered,
		total: len(e.list), err: e.err, stopped: e.stopped, filterErr: e.filterErr}
}

// filter builds the state of list, recovering a panic of the WithFilter
// function as a *cluster.PanicError.
func (b *Builder) filter(list []subscriber.Instance) (st resolver.State, filtered int, pe error) {
	defer func() {
		if r := recover(); r != nil {
			pe = cluster.NewPanicError("reboundgrpc.WithFilter", r)
		}
	}()
	st, filtered = endpoints(list, b.o.filter)
	return st, filtered, nil
}

func (b *Builder) filterPanicked(e *entry, err error) {
	b.panics.Add(1)
	var pe *cluster.PanicError
	if errors.As(err, &pe) {
		b.log.Error("recovered a panic of the filter; the ClientConns keep the last good list",
			zap.Stringer("key", e.key), zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
	}
}

// safeObserver wraps o so that a panic is recovered (counted in
// Stats.Panics and logged at Error) instead of killing the resolver's
// goroutine and the process.
type safeObserver struct {
	b *Builder
	o rebound.Observer
}

func (s safeObserver) Observe(ev rebound.Event) {
	defer func() {
		if r := recover(); r != nil {
			s.b.panics.Add(1)
			pe := cluster.NewPanicError("reboundgrpc observer ("+ev.Kind.String()+")", r)
			s.b.log.Error("recovered a panic of an observer", zap.String("op", pe.Op),
				zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
		}
	}()
	s.o.Observe(ev)
}

// release detaches r from its entry; the last resolver starts the linger.
func (b *Builder) release(r *ccResolver) {
	e := r.e
	b.mu.Lock()
	if _, ok := e.resolvers[r]; !ok {
		b.mu.Unlock()
		return
	}
	delete(e.resolvers, r)
	if len(e.resolvers) > 0 || e.removed {
		b.mu.Unlock()
		return
	}
	if b.o.linger == 0 {
		b.removeLocked(e)
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			b.unsubscribe(e)
		}()
		return
	}
	b.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(b.o.linger, func() {
		defer b.wg.Done()
		b.mu.Lock()
		if e.linger != t || e.removed || len(e.resolvers) > 0 {
			b.mu.Unlock()
			return
		}
		e.linger = nil
		b.removeLocked(e)
		b.mu.Unlock()
		b.unsubscribe(e)
	})
	e.linger = t
	b.mu.Unlock()
}

// resolveNow coalesces ResolveNow calls of every resolver of e into at most
// one re-confirmation per interval.
func (b *Builder) resolveNow(e *entry) {
	b.resolveNows.Add(1)
	b.mu.Lock()
	if e.removed || e.refreshTimer != nil {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	next := e.lastRefresh.Add(b.o.rnInterval)
	if e.lastRefresh.IsZero() || !now.Before(next) {
		e.lastRefresh = now
		b.mu.Unlock()
		b.refresh(e)
		return
	}
	b.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(next.Sub(now), func() {
		defer b.wg.Done()
		b.mu.Lock()
		if e.refreshTimer != t || e.removed {
			b.mu.Unlock()
			return
		}
		e.refreshTimer = nil
		e.lastRefresh = time.Now()
		b.mu.Unlock()
		b.refresh(e)
	})
	e.refreshTimer = t
	b.mu.Unlock()
}

// refresh asks the Manager to confirm e's subscription again
// (Subscription.Refresh: one limiter-paced registry request, and nothing
// while the subscription is pending, retrying or within the Manager's own
// refresh interval), unless the Manager is confirming it anyway. A held
// subscription (an empty list held back, StateHeld) is refreshed too: the
// registry is asked whether the providers are back, which ends the hold
// early when they are.
func (b *Builder) refresh(e *entry) {
	if st := e.sub.Status().State; st != subscriber.StateSubscribed && st != subscriber.StateHeld {
		return
	}
	b.refreshes.Add(1)
	e.sub.Refresh()
}

// keyName describes a key in error messages: "service "orders" (group
// "G", namespace "N", clusters a,b)", the parts that are set.
func keyName(k subscriber.Key) string {
	s := "service " + strconv.Quote(k.Service)
	var parts []string
	if k.Group != "" {
		parts = append(parts, "group "+strconv.Quote(k.Group))
	}
	if k.Namespace != "" {
		parts = append(parts, "namespace "+strconv.Quote(k.Namespace))
	}
	if len(k.Clusters) > 0 {
		parts = append(parts, "clusters "+strings.Join(k.Clusters, ","))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
