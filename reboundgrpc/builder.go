package reboundgrpc

import (
	"errors"
	"fmt"
	"runtime/debug"
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

// The errors a ClientConn hears through ReportError: no instance passes
// the filter; no first list yet and the registry answered with an error.
var (
	errNoInstances = errors.New("reboundgrpc: no instances")
	errUnresolved  = errors.New("reboundgrpc: no instance list yet")
)

// Builder is a grpc-go resolver.Builder over a subscriber.Manager: pass it
// to grpc.NewClient with grpc.WithResolvers. ClientConns of one Key share
// one Manager subscription. It is safe for concurrent use; it does not own
// the Manager: close it after the ClientConns and before the Manager.
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
	keys      map[string]*keyState // the keys of the open resolvers

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

// stats counts what a Builder did, for tests and the metrics.
type stats struct {
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
	// they led to after coalescing (see withResolveNowInterval).
	ResolveNows, Refreshes uint64
	// Rejected counts states a ClientConn rejected (UpdateState errors),
	// each sent again with backoff. An empty list is not counted.
	Rejected uint64
	// Panics counts recovered panics of the WithFilter function and of
	// WithPolicy's observers (each logged at Error with its stack).
	Panics uint64
}

// NewBuilder returns a Builder over m. A nil m or a bad option is a
// *rebound.ArgumentError; a closed m's error matches rebound.ErrClosed.
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
	var meter rebound.Option
	if o.mp != nil {
		meter = rebound.WithMeterProvider(o.mp, append(o.attrs[:len(o.attrs):len(o.attrs)], attribute.String("component", "reboundgrpc"))...)
	}
	log := logging.Redacted(o.log) // nil: zap.NewNop()
	views, err := m.NewWatchGroup(o.linger, o.rnInterval)
	if err != nil {
		return nil, fmt.Errorf("reboundgrpc.NewBuilder: %w", err)
	}
	b := &Builder{
		m:         m,
		o:         o,
		log:       log.With(zap.String("component", "reboundgrpc")),
		views:     views,
		resolvers: make(map[*ccResolver]struct{}),
		keys:      make(map[string]*keyState),
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
		st := b.stats()
		return telemetry.GRPCStats{Subscriptions: int64(st.Subscriptions), Resolvers: int64(st.Resolvers),
			ResolveNows: int64(st.ResolveNows), Refreshes: int64(st.Refreshes), Rejected: int64(st.Rejected)}
	})
	if err != nil {
		_ = views.Close()
		return nil, &rebound.ArgumentError{Func: "reboundgrpc.WithPolicy", Arg: "opts", Reason: "could not create the instruments", Err: err}
	}
	return b, nil
}

// Scheme returns "rebound", the scheme of the targets the Builder
// resolves.
func (b *Builder) Scheme() string { return scheme }

// Build implements resolver.Builder: it opens a View of the target's key
// and never blocks on the registry. It fails for a target the package
// doc's syntax rejects, after Close (ErrClosed), or when the Manager is
// closed.
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

// Close lets go of the Builder's subscriptions and stops its resolvers,
// which keep their last state: close the ClientConns first. It is
// idempotent and returns nil. Called from a filter or observer, it does not
// wait for the calling goroutine.
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

// stats returns the Builder's counters.
func (b *Builder) stats() stats {
	b.mu.Lock()
	res := len(b.resolvers)
	b.mu.Unlock()
	vs := b.views.Stats()
	return stats{
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
			pe = &cluster.PanicError{Op: "reboundgrpc.WithFilter", Value: r, Stack: debug.Stack()}
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
func (b *Builder) filteredOut(id string, key subscriber.Key, version uint64, list []subscriber.Instance) {
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
// the stats and logged at Error) instead of killing the resolver's
// goroutine and the process.
type safeObserver struct {
	b *Builder
	o rebound.Observer
}

func (s safeObserver) Observe(ev rebound.Event) {
	defer func() {
		if r := recover(); r != nil {
			s.b.panics.Add(1)
			pe := &cluster.PanicError{Op: "reboundgrpc observer (" + ev.Kind.String() + ")", Value: r, Stack: debug.Stack()}
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
