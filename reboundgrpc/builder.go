package reboundgrpc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/closed"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// ErrClosed is returned by Build after Close. It matches rebound.ErrClosed.
var ErrClosed = closed.New("reboundgrpc: builder closed")

// ErrNoInstances is wrapped by the error a ClientConn receives through
// ReportError when the registry lists no instance that passes the filter.
var ErrNoInstances = errors.New("reboundgrpc: no instances")

// ErrUnresolved is wrapped by the error a ClientConn receives through
// ReportError while its subscription has not delivered a first list and
// the registry answered with an error (see WithUnresolvedReport).
var ErrUnresolved = errors.New("reboundgrpc: no instance list yet")

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
	views *subscriber.WatchGroup // the shared views: linger and ResolveNow pacing

	mu        sync.Mutex
	closed    bool
	resolvers map[*ccResolver]struct{}
	keys      map[subscriber.KeyID]*keyState // the keys of the open resolvers

	builds, resolveNows, rejected, panics atomic.Uint64
}

// keyState is what the Builder keeps of a key while it has open
// resolvers.
type keyState struct {
	resolvers int
	warned    listID // the list filteredOut logged last; zero: none
}

// listID tells lists of one key apart without keeping them: the view's
// version (one per list once a first list came) and the list's length.
type listID struct {
	version uint64
	n       int
}

// Stats counts what a Builder did, for tests and dashboards.
type Stats struct {
	// Subscriptions is the number of keys whose shared Manager
	// subscription the Builder holds now (one per Key in use or
	// lingering).
	Subscriptions int
	// Resolvers is the number of resolvers open now.
	Resolvers int
	// Subscribes and Unsubscribes count the times the Builder took and
	// let go of a key's shared subscription (subscriber.WatchGroup) since
	// NewBuilder.
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

// NewBuilder returns a Builder over m. Errors: a *rebound.ArgumentError
// for a nil m or a bad option; an error wrapping
// subscriber.ErrManagerClosed if m is closed. The defaults are in the
// options' docs.
func NewBuilder(m *subscriber.Manager, opts ...Option) (*Builder, error) {
	o := options{
		linger:     defaultLinger,
		filter:     defaultFilter,
		rnInterval: defaultResolveNowInterval,
		unresolved: defaultUnresolvedReport,
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
	log := logging.Redacted(o.log) // nil: zap.NewNop()
	views, err := m.NewWatchGroup(subscriber.WatchLinger(o.linger), subscriber.WatchRefreshInterval(o.rnInterval))
	if err != nil {
		return nil, fmt.Errorf("reboundgrpc.NewBuilder: %w", err)
	}
	b := &Builder{
		m:         m,
		o:         o,
		log:       log.With(zap.String("component", "reboundgrpc")),
		views:     views,
		resolvers: make(map[*ccResolver]struct{}),
		keys:      make(map[subscriber.KeyID]*keyState),
	}
	ropts := []rebound.Option{meter}
	for _, ob := range o.observers {
		ropts = append(ropts, rebound.WithObserver(safeObserver{b, ob}))
	}
	retry, err := rebound.NewRetrier(o.policy, ropts...)
	if err != nil {
		_ = views.Close()
		return nil, err
	}
	b.retry = retry
	b.meter, err = telemetry.NewGRPC(o.mp, func() telemetry.GRPCStats {
		st := b.Stats()
		return telemetry.GRPCStats{Subscriptions: int64(st.Subscriptions), Resolvers: int64(st.Resolvers),
			ResolveNows: int64(st.ResolveNows), Refreshes: int64(st.Refreshes), Rejected: int64(st.Rejected)}
	})
	if err != nil {
		_ = views.Close()
		return nil, &rebound.ArgumentError{Func: "reboundgrpc.WithMeterProvider", Arg: "mp", Reason: "could not create the instruments", Err: err}
	}
	return b, nil
}

// Scheme returns "rebound", the scheme of the targets the Builder
// resolves.
func (b *Builder) Scheme() string { return scheme }

// Build implements resolver.Builder. It never blocks on the registry and
// never fails because the registry is down: it opens a View of the
// target's key (subscriber.WatchGroup.Watch: the Manager's one shared
// subscription of the key, started at once if there is none) and returns.
// The ClientConn gets the key's last list at once if there is one, and
// every later list as it arrives; until the first list RPCs wait
// (fail-fast RPCs fail with Unavailable once the registry's error is
// reported, see WithUnresolvedReport). When the subscription stops for
// good (a permanent registry error), the ClientConn keeps its last list
// and hears the error through ReportError; its next ResolveNow subscribes
// again, as a new Build does.
//
// It returns an error for a target ParseTarget rejects, after Close
// (ErrClosed), and when the Manager refuses the subscription (closed).
func (b *Builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	key, err := keyFromTarget(target)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	v, err := b.views.Watch(key)
	if err != nil {
		return nil, fmt.Errorf("reboundgrpc: subscribe %s: %w", keyName(key), err)
	}
	r := newResolver(b, key, v, cc)
	b.resolvers[r] = struct{}{}
	ks := b.keys[r.id]
	if ks == nil {
		ks = &keyState{}
		b.keys[r.id] = ks
	}
	ks.resolvers++
	b.builds.Add(1)
	r.start()
	return r, nil
}

// Close lets go of every subscription of the Builder (lingering ones
// too), waits until those it was the last to hold are unsubscribed, and
// stops the goroutines of the resolvers still open: they keep the last
// state they sent to their ClientConn and get no further update, so close
// the ClientConns first. Build returns ErrClosed afterwards. Close is
// idempotent and always returns nil (Unsubscribe errors are logged by the
// Manager). Called from the WithFilter function or a hook (on a
// resolver's goroutine), it does not wait for that goroutine, which ends
// when the call returns.
func (b *Builder) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	rs := make([]*ccResolver, 0, len(b.resolvers))
	for r := range b.resolvers {
		rs = append(rs, r)
	}
	b.mu.Unlock()
	if !first {
		return nil
	}
	for _, r := range rs {
		r.stop()
	}
	_ = b.views.Close()
	_ = b.meter.Close()
	return nil
}

// forget takes a closed resolver out of the Builder's set, and forgets
// its key with the key's last resolver.
func (b *Builder) forget(r *ccResolver) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.resolvers[r]; !ok {
		return
	}
	delete(b.resolvers, r)
	if ks := b.keys[r.id]; ks != nil {
		if ks.resolvers--; ks.resolvers == 0 {
			delete(b.keys, r.id)
		}
	}
}

// Stats returns the Builder's counters.
func (b *Builder) Stats() Stats {
	b.mu.Lock()
	res := len(b.resolvers)
	b.mu.Unlock()
	vs := b.views.Stats()
	return Stats{
		Subscriptions: vs.Keys,
		Resolvers:     res,
		Subscribes:    vs.Subscribes,
		Unsubscribes:  vs.Unsubscribes,
		Builds:        b.builds.Load(),
		ResolveNows:   b.resolveNows.Load(),
		Refreshes:     vs.Refreshes,
		Rejected:      b.rejected.Load(),
		Panics:        b.panics.Load(),
	}
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

// filteredOut logs at Warn that the filter left none of key's list (the
// view's version), once per list however many ClientConns read it; an
// empty list (a usable one) forgets the one logged. The Builder forgets it
// too when the key's last resolver closes: a key whose ClientConns come
// back logs its list again.
func (b *Builder) filteredOut(id subscriber.KeyID, key subscriber.Key, version uint64, list []subscriber.Instance) {
	b.mu.Lock()
	ks := b.keys[id]
	if ks == nil { // not the Builder's (any more): log, remember nothing
		ks = &keyState{}
	}
	if len(list) == 0 {
		ks.warned = listID{}
		b.mu.Unlock()
		return
	}
	lid := listID{version: version, n: len(list)}
	first := ks.warned != lid
	ks.warned = lid
	b.mu.Unlock()
	if first {
		b.log.Warn("every instance is filtered out", zap.Stringer("key", key),
			zap.String("why", filteredOut(b.o.custom, list)))
	}
}

func (b *Builder) filterPanicked(key subscriber.Key, err error) {
	b.panics.Add(1)
	var pe *cluster.PanicError
	if errors.As(err, &pe) {
		b.log.Error("recovered a panic of the filter; the ClientConns keep the last good list",
			zap.Stringer("key", key), zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
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

// filteredOut says why no instance of list passed the filter:
// subscriber.FilteredOut for the default filter; with WithFilter, whose reasons
// the Builder cannot know, that the filter refused them all.
func filteredOut(custom bool, list []subscriber.Instance) string {
	if !custom {
		return subscriber.FilteredOut(subscriber.Key{}, list)
	}
	if len(list) == 1 {
		return "1 instance, refused by the filter (WithFilter)"
	}
	return fmt.Sprintf("%d instances, all refused by the filter (WithFilter)", len(list))
}
