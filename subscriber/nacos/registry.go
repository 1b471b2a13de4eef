package nacos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Registry (see WithPollInterval and withEvidenceWindow).
const (
	defaultPollInterval     = 100 * time.Millisecond
	defaultDownPollInterval = time.Second
	defaultEvidenceWindow   = 2 * time.Second
	defaultEvidenceCap      = 10 * time.Second // below the Manager's confirmation cap, 15 s

	// shutdownProbeInterval: see Registry.lastProbe.
	shutdownProbeInterval = 10 * time.Second
)

// sentinel is an error with its own text that matches other errors with
// errors.Is (through Unwrap), so that its text is not repeated after theirs.
type sentinel struct {
	msg string
	is  []error
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Unwrap() []error { return e.is }

var (
	// errClosed is returned by Subscribe after Registry.Close and when the
	// SDK client was closed: rebound.ErrClosed, in the adapter's words.
	errClosed error = &sentinel{"nacos: registry closed", []error{rebound.ErrClosed}}
	// errInvalidKey is wrapped by the (permanent) error for a key the
	// client can never serve: rebound.ErrInvalidArgument.
	errInvalidKey error = &sentinel{"nacos: invalid key", []error{rebound.ErrInvalidArgument}}
	// errNotConnected is the cause of the (transient) error
	// Subscribe returns without calling the SDK while the client is not
	// connected (transient).
	errNotConnected error = &sentinel{"client not connected", nil}
	// ErrRejected is wrapped by the error of a request the
	// server refused (TPS control, auth) that nacos-sdk-go reports as
	// success or false: a subscribe, a lookup, a register or a deregister.
	ErrRejected = errors.New("request rejected by the server (nacos-sdk-go reports such a rejection as success or as false)")
	// errNoEvidence is the reason passed to Sink.Resubscribe for a
	// subscription that showed no evidence of being held by the server
	// within the evidence window after a reconnect: the SDK's redo of it
	// failed, was rejected, or was lost.
	errNoEvidence = errors.New("no evidence after the reconnect that the server holds the subscription (the SDK's redo failed or was rejected)")
)

// Registry is a subscriber.Registry and subscriber.ConnectionMonitor (one
// that confirms reconnects) over a nacos-sdk-go/v2 naming client. It
// is safe for concurrent use. It does not own the client: closing the
// client (CloseClient) ends the subscriptions using it with an error matching rebound.ErrClosed, and
// so does Close.
type Registry struct {
	client naming_client.INamingClient
	cfg    config
	log    *zap.Logger
	// emptyCached: the client stores empty lists in its cache
	// (ClientConfig.UpdateCacheWhenEmpty). Assumed true when the client
	// does not tell: that errs on the side of a subscribe request.
	emptyCached bool
	closed      atomic.Bool

	// Connection state, maintained by MonitorConnection while it runs.
	monitoring atomic.Bool
	up         atomic.Bool
	// The SDK reports a closed client only through the error of a call:
	// while disconnected, one Subscribe every shutdownProbeInterval still
	// calls the SDK (lastProbe, unix ns) to find out; clientClosed
	// remembers the answer for every subscription.
	lastProbe    atomic.Int64
	clientClosed atomic.Bool

	mu     sync.Mutex
	subs   map[subscriber.Sink]*sub
	groups map[string]*group // by SDK cache key

	lookup lookupConn // see Lookup
}

// group is the adapter's state for one SDK cache key, shared by the
// subscriptions of that key.
type group struct {
	mu   sync.Mutex // held during SDK calls and cache reads of the key
	refs int        // subs + operations in flight, under Registry.mu
	subs map[*sub]struct{}
	get  vo.GetServiceParam

	// cached: the SDK's cache holds the key, so GetService reads it
	// without a server call. Set when a list is stored (our callback ran,
	// or a read returned one the SDK keeps), cleared before our Unsubscribe
	// (which deletes the entry).
	cached atomic.Bool
	// lastRef is the LastRefTime last read from the SDK's cache.
	lastRef atomic.Uint64
	// epoch counts our SDK Unsubscribes of the key (under mu): each may
	// delete the SDK's cache entry, after which LastRefTime starts afresh.
	epoch uint64
	// client is the Registry's, for the callbacks' reads of the cache.
	client naming_client.INamingClient
	// baseline is lastRef when the disconnection was seen (written by the
	// monitor goroutine).
	baseline atomic.Uint64
}

// sub is the adapter's state for one Sink.
type sub struct {
	key   subscriber.Key
	sink  subscriber.Sink
	g     *group
	gkey  string
	param *vo.SubscribeParam // stable: the SDK identifies the callback by &param.SubscribeCallback

	registered bool // our callback is in the SDK's list (guarded by g.mu)
	// ok: the last Subscribe succeeded, so after a reconnect the adapter
	// owes the Manager a Confirmed or a Resubscribe for it.
	ok atomic.Bool
	// handedBack: the evidence window after a reconnect handed it back
	// (Resubscribe(errNoEvidence)), and no Subscribe has run since.
	handedBack atomic.Bool

	active atomic.Bool
	mu     sync.Mutex // serializes deliveries to sink
	calls  uint64     // callback invocations, under mu
	// last is the list last passed to sink (under mu), the only copy of
	// a list the adapter keeps. The SDK forces it: nacos-sdk-go v2.3.2
	// applies a subscribe reply and a push to its cache without a lock
	// (ServiceInfoHolder.ProcessService), so both can see a change and run
	// the callbacks with the same list: the second one is dropped here. The
	// sink owns the slice it gets (it sorts it), hence a copy.
	last    []subscriber.Instance
	hasLast bool
	// ref and epoch (under mu) are the LastRefTime of the list last passed
	// to sink and g.epoch then, when known (ref 0: unknown). The SDK's
	// unlocked ProcessService can also store an older reply over a newer
	// push and run the callbacks with the older list: see passLocked.
	ref, epoch uint64
}

// updateLocked passes list to the sink unless it equals the list passed
// last. s.mu must be held.
func (s *sub) updateLocked(list []subscriber.Instance) {
	if s.hasLast && sameList(s.last, list) {
		return
	}
	s.last, s.hasLast = slices.Clone(list), true
	s.sink.Update(list)
}

// sameList reports whether a and b hold the same instances, in any order.
func sameList(a, b []subscriber.Instance) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(x, y subscriber.Instance) int {
		return cmp.Or(cmp.Compare(x.IP, y.IP), cmp.Compare(x.Port, y.Port),
			cmp.Compare(x.Cluster, y.Cluster), cmp.Compare(x.ID, y.ID))
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, key)
	slices.SortFunc(b, key)
	return reflect.DeepEqual(a, b)
}

// New returns a Registry over client. It returns an *rebound.ArgumentError
// for a nil client (a typed nil included) or a bad option value.
func New(client naming_client.INamingClient, opts ...Option) (*Registry, error) {
	if nilness.Is(client) {
		return nil, &rebound.ArgumentError{Func: "nacos.New", Arg: "client", Reason: "is nil"}
	}
	cfg := config{poll: defaultPollInterval, downPoll: defaultDownPollInterval, window: defaultEvidenceWindow, cap: defaultEvidenceCap}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	emptyCached := true
	if cc, ok := client.(interface {
		GetClientConfig() (constant.ClientConfig, error)
	}); ok {
		if c, err := cc.GetClientConfig(); err == nil {
			emptyCached = c.UpdateCacheWhenEmpty
			cfg.namespace, cfg.nsSet = c.NamespaceId, true
		}
	}
	if cfg.nsSet && cfg.namespace == "" {
		cfg.namespace = constant.DEFAULT_NAMESPACE_ID
	}
	log := cfg.log
	if log == nil {
		log = zap.NewNop()
	}
	return &Registry{
		client:      client,
		cfg:         cfg,
		log:         log.With(zap.String("component", "subscriber/nacos")),
		emptyCached: emptyCached,
		subs:        make(map[subscriber.Sink]*sub),
		groups:      make(map[string]*group),
	}, nil
}

// Close marks the Registry closed: Subscribe returns an error matching
// rebound.ErrClosed from now on, and MonitorConnection returns.
// It does not close the SDK client. It is idempotent and returns nil.
func (r *Registry) Close() error {
	r.closed.Store(true)
	r.lookup.close()
	return nil
}

// ConfirmsReconnects implements subscriber.ConnectionMonitor: it returns
// true. After a reconnect the adapter confirms each subscription from the
// SDK's cache or hands it back (Sink.Resubscribe) within 10 s.
func (r *Registry) ConfirmsReconnects() bool { return true }

func opError(op string, key subscriber.Key, err error) error {
	if err != errNotConnected && strings.Contains(err.Error(), "client not connected") {
		// The SDK's own "client not connected, current status:..." error.
		err = &sdkError{err: err, is: errNotConnected}
	}
	return opErr(op, key, err)
}

// opErr returns the error of a failed operation, "nacos: op key: err",
// wrapping err.
func opErr(op string, key subscriber.Key, err error) error {
	return fmt.Errorf("nacos: %s %s: %w", op, key, err)
}

// sdkError is an SDK error that also matches one of this package's
// sentinels, keeping the SDK's text.
type sdkError struct {
	err, is error
}

func (e *sdkError) Error() string   { return e.err.Error() }
func (e *sdkError) Unwrap() []error { return []error{e.is, e.err} }

// Subscribe implements subscriber.Registry: one attempt to have the server
// hold a subscription for sink, and sink its current list. It returns nil
// only with evidence that the server accepted; a rejection the SDK reports
// as success is ErrRejected. It never calls the SDK while the client is
// disconnected (see the package documentation for the SDK calls it makes).
func (r *Registry) Subscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.closed.Load() || r.clientClosed.Load() {
		return errClosed
	}
	if sink == nil {
		return rebound.Permanent(&rebound.ArgumentError{Func: "nacos.Registry.Subscribe", Arg: "sink", Reason: "is nil"})
	}
	s, err := r.acquire(key, sink)
	if err != nil {
		return err
	}
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if err := r.connected(); err != nil && !r.probeDue() {
		// Calling the SDK while it is disconnected only produces errors
		// after its request timeout, and a request that fails just as the
		// client reconnects makes the SDK mark the new connection unhealthy
		// again: do not call it (but for a rare probe, see lastProbe).
		return opError("subscribe", key, err)
	}
	s.ok.Store(false)
	defer s.handedBack.Store(false)
	if err := r.subscribeLocked(s); err != nil {
		return err
	}
	s.ok.Store(true)
	return nil
}

func (r *Registry) subscribeLocked(s *sub) error {
	g := s.g
	s.mu.Lock()
	before := s.calls
	s.mu.Unlock()
	s.active.Store(true)
	switch {
	case s.registered && !g.cached.Load():
		// The SDK holds our callback and its redo entry but no list: a
		// GetService sends a subscribe request, without adding a callback.
		return r.verifyLocked(s, before)
	case s.registered:
		if s.handedBack.Swap(false) {
			// Handed back for want of evidence after a reconnect: if the
			// evidence arrived since (a slow redo, a push), the server
			// holds it and nothing needs sending.
			if ref, ok := r.peekLocked(g); ok && ref > g.baseline.Load() {
				return nil
			}
		}
		// The SDK holds our callback, the redo entry and a list: its
		// Subscribe would send nothing. Unsubscribe (which removes exactly
		// our callback, the list and the redo entry) so that it does.
		g.cached.Store(false)
		g.epoch++
		uerr := r.client.Unsubscribe(s.param)
		s.registered = false
		if isShutdown(uerr) {
			r.clientClosed.Store(true)
			return errClosed
		}
		r.log.Debug("unsubscribed before resubscribing", zap.Stringer("key", s.key), zap.Error(uerr))
		s.mu.Lock()
		before = s.calls
		s.mu.Unlock()
	}
	err := r.client.Subscribe(s.param)
	s.registered = true // the SDK appended the callback before sending
	if err != nil {
		if isShutdown(err) {
			r.clientClosed.Store(true)
			return errClosed
		}
		return opError("subscribe", s.key, err)
	}
	return r.verifyLocked(s, before)
}

// verifyLocked checks, after an SDK call that returned nil, that the server
// accepted the subscription, and makes sure s.sink has the current list.
// before is s.calls before the call.
func (r *Registry) verifyLocked(s *sub, before uint64) error {
	g := s.g
	s.mu.Lock()
	fired := s.calls != before
	s.mu.Unlock()
	if fired {
		// Our callback ran: the SDK stored a list it had not cached, from
		// the reply (or a push): the server answered with data. Read the
		// stored LastRefTime (a cache hit).
		r.peekLocked(g)
		return nil
	}
	// Not under s.mu: on a cache miss GetService sends a subscribe request
	// and the SDK runs the callbacks (ours too) from this goroutine.
	svc, err := r.client.GetService(g.get)
	if err != nil {
		if isShutdown(err) {
			r.clientClosed.Store(true)
			return errClosed
		}
		return opError("subscribe", s.key, err)
	}
	if svc.LastRefTime == 0 {
		// Neither the cache nor the reply had data from the server: the
		// SDK got a failure reply of the handler's own type (TPS control,
		// auth), which it reports as success.
		return opError("subscribe", s.key, ErrRejected)
	}
	g.lastRef.Store(svc.LastRefTime)
	if len(svc.Hosts) > 0 || r.emptyCached {
		g.cached.Store(true)
	}
	list := convert(svc.Hosts)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A callback that ran meanwhile delivered a list at least as new.
	if s.calls == before && s.active.Load() {
		s.passLocked(list, svc.LastRefTime, g.epoch)
	}
	return nil
}

// peekLocked reads the LastRefTime of g's key from the SDK's cache, without
// a server call (g.cached), and records it. g.mu must be held.
func (r *Registry) peekLocked(g *group) (uint64, bool) {
	if !g.cached.Load() {
		return 0, false
	}
	svc, err := r.client.GetService(g.get)
	if err != nil || svc.LastRefTime == 0 {
		return 0, false
	}
	g.lastRef.Store(svc.LastRefTime)
	return svc.LastRefTime, true
}

// connected returns nil if the SDK may be called now.
func (r *Registry) connected() error {
	if r.monitoring.Load() {
		if !r.up.Load() {
			return errNotConnected
		}
		return nil
	}
	if !r.client.ServerHealthy() {
		return errNotConnected
	}
	return nil
}

// probeDue reports whether a Subscribe that found the client disconnected
// should call the SDK anyway, to learn whether the client was closed: at
// most once per shutdownProbeInterval for the whole Registry.
func (r *Registry) probeDue() bool {
	now := time.Now().UnixNano()
	last := r.lastProbe.Load()
	if now-last < int64(shutdownProbeInterval) {
		return false
	}
	return r.lastProbe.CompareAndSwap(last, now)
}

// probeClosed reports whether the SDK client was closed (CloseClient).
// nacos-sdk-go v2.3.2 keeps that state in unexported fields (the rpc
// client's status SHUTDOWN) and tells it only through the error of a
// request: "client not connected, current status:SHUTDOWN". The probe is
// GetAllServicesInfo for one name, a read-only ServiceListRequest (no
// subscription, no callback, no cache entry), which a disconnected client
// fails within its request timeout (at most about 300 ms) without sending.
func (r *Registry) probeClosed() bool {
	if r.clientClosed.Load() {
		return true
	}
	_, err := r.client.GetAllServicesInfo(vo.GetAllServiceInfoParam{NameSpace: r.cfg.namespace, PageNo: 1, PageSize: 1})
	if isShutdown(err) {
		r.clientClosed.Store(true)
		return true
	}
	return false
}

// Unsubscribe implements subscriber.Registry: it stops deliveries to sink,
// removes its SDK callback with the SDK's Unsubscribe, and asks the other
// subscriptions of the same key, if any, to resubscribe (the SDK
// unsubscribed the client from the service on the server).
func (r *Registry) Unsubscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	r.mu.Lock()
	s, ok := r.subs[sink]
	if ok {
		delete(r.subs, sink)
	}
	r.mu.Unlock()
	if !ok {
		return nil
	}
	s.active.Store(false)
	s.ok.Store(false)
	s.g.mu.Lock()
	var err error
	switch {
	case s.registered && r.clientClosed.Load():
		// A closed client sends nothing: its Unsubscribe would only fail
		// after the request timeout (for each subscription in turn).
		s.g.cached.Store(false)
		s.registered = false
		err = errClosed
	case s.registered:
		s.g.cached.Store(false)
		s.g.epoch++
		err = r.client.Unsubscribe(s.param)
		s.registered = false
	}
	s.g.mu.Unlock()

	r.mu.Lock()
	delete(s.g.subs, s)
	others := make([]subscriber.Sink, 0, len(s.g.subs))
	for o := range s.g.subs {
		others = append(others, o.sink)
	}
	r.releaseLocked(s.g, s.gkey)
	r.mu.Unlock()
	for _, o := range others {
		o.Resubscribe(fmt.Errorf("another subscription of %s unsubscribed (the SDK unsubscribes the whole key)", key))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errClosed):
		return err
	case isShutdown(err):
		r.clientClosed.Store(true)
		return errClosed
	default:
		return opError("unsubscribe", key, err)
	}
}

// acquire returns sink's state, creating it on the first call.
func (r *Registry) acquire(key subscriber.Key, sink subscriber.Sink) (*sub, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.subs[sink]; ok {
		return s, nil
	}
	param, err := r.param(key)
	if err != nil {
		return nil, err
	}
	s := &sub{key: key, sink: sink, param: param}
	s.gkey = param.GroupName + "@@" + param.ServiceName + "@@" + strings.Join(param.Clusters, ",")
	g, ok := r.groups[s.gkey]
	if !ok {
		g = &group{
			client: r.client,
			subs:   make(map[*sub]struct{}),
			get:    vo.GetServiceParam{ServiceName: param.ServiceName, GroupName: param.GroupName, Clusters: param.Clusters},
		}
		r.groups[s.gkey] = g
	}
	g.refs++
	g.subs[s] = struct{}{}
	s.g = g
	param.SubscribeCallback = s.callback
	r.subs[sink] = s
	return s, nil
}

func (r *Registry) releaseLocked(g *group, gkey string) {
	g.refs--
	if g.refs == 0 {
		delete(r.groups, gkey)
	}
}

// param maps a key to the SDK's subscribe parameters.
func (r *Registry) param(key subscriber.Key) (*vo.SubscribeParam, error) {
	bad := func(format string, args ...any) error {
		return rebound.Permanent(fmt.Errorf("%w %s: "+format, append([]any{errInvalidKey, key}, args...)...))
	}
	if strings.TrimSpace(key.Service) == "" {
		return nil, bad("empty service name")
	}
	if strings.Contains(key.Service, "@@") || strings.Contains(key.Group, "@@") {
		return nil, bad(`service and group names must not contain "@@"`)
	}
	if key.Namespace != "" && r.cfg.nsSet && key.Namespace != r.cfg.namespace {
		return nil, bad("namespace %q is not the client's namespace %q", key.Namespace, r.cfg.namespace)
	}
	group := key.Group
	if group == "" {
		group = constant.DEFAULT_GROUP
	}
	var clusters []string
	for _, c := range key.Clusters {
		if c == "" || strings.Contains(c, ",") {
			return nil, bad("cluster name %q is empty or contains a comma", c)
		}
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	return &vo.SubscribeParam{ServiceName: key.Service, GroupName: group, Clusters: clusters}, nil
}
