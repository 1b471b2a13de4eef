package nacos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Registry.
const (
	// DefaultPollInterval is how often MonitorConnection polls
	// ServerHealthy while the client is connected.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultDownPollInterval is how often it polls while the client is
	// not connected.
	DefaultDownPollInterval = time.Second
	// DefaultSettle is how long the client must have been connected again
	// before MonitorConnection reports Connected and before the adapter
	// confirms a subscription it already holds (see WithSettle).
	DefaultSettle = time.Second

	// shutdownProbeInterval: see Registry.lastProbe.
	shutdownProbeInterval = 10 * time.Second
)

var (
	// ErrNilClient is returned by NewRegistry for a nil client.
	ErrNilClient = errors.New("nacos: naming client is nil")
	// ErrClosed is returned after Registry.Close and when the SDK client
	// was closed. It wraps subscriber.ErrRegistryClosed.
	ErrClosed = fmt.Errorf("nacos: client closed: %w", subscriber.ErrRegistryClosed)
	// ErrInvalidKey is wrapped by the (permanent) error for a key the
	// client can never serve.
	ErrInvalidKey = errors.New("nacos: invalid key")
	// ErrNotConnected is wrapped by the (transient) error Subscribe returns
	// without calling the SDK while the client is not connected, or while
	// it has been connected again for less than the settle time. It wraps
	// subscriber.ErrDisconnected.
	ErrNotConnected = fmt.Errorf("nacos: client not connected: %w", subscriber.ErrDisconnected)
)

// Error is a failed SDK call, with the key it was for. Errors of the SDK
// are transient unless they wrap ErrClosed.
type Error struct {
	// Op is the SDK call: "subscribe" or "unsubscribe".
	Op  string
	Key subscriber.Key
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("nacos: %s %s: %v", e.Op, e.Key, e.Err) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// An Option configures a Registry.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	log       *zap.Logger
	namespace string
	nsSet     bool
	poll      time.Duration
	downPoll  time.Duration
	settle    time.Duration
}

// WithLogger sets the logger (default: none). The adapter logs at Debug
// only; the Manager logs the retries.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) { c.log = l })
}

// WithNamespace sets the namespace id the client was configured with, so
// that keys naming another namespace are rejected. Default: read from the
// client when it has a GetClientConfig method (the SDK's NamingClient
// does), "public" when that is empty; for other clients keys may name any
// namespace.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) { c.namespace, c.nsSet = ns, true })
}

// WithPollInterval sets how often MonitorConnection polls the client's
// ServerHealthy while connected (up) and while not (down). Zero or
// negative values keep the defaults, DefaultPollInterval and
// DefaultDownPollInterval.
func WithPollInterval(up, down time.Duration) Option {
	return optionFunc(func(c *config) {
		if up > 0 {
			c.poll = up
		}
		if down > 0 {
			c.downPoll = down
		}
	})
}

// WithSettle sets how long the client must have been connected again after
// a disconnection before MonitorConnection reports Connected and before
// Subscribe confirms a subscription the SDK already holds. Default
// DefaultSettle; a negative d keeps the default, 0 disables the wait.
//
// Why: on every reconnect the SDK re-sends its cached subscriptions (its
// "redo") from its own goroutine. Confirming a subscription means an SDK
// Unsubscribe then Subscribe (the only way to make the SDK send a real
// subscribe request); if that pair interleaves with the redo, the SDK can
// skip the send (it believes the redo's request is in place) while the
// server processes our unsubscribe after the redo's subscribe, leaving the
// client unsubscribed. Waiting for the redo to finish first closes that
// window in practice; the redo of a few thousand subscriptions takes well
// under a second on a healthy connection.
func WithSettle(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d >= 0 {
			c.settle = d
		}
	})
}

// Registry is a subscriber.Registry and subscriber.ConnectionMonitor over
// a nacos-sdk-go/v2 naming client. It is safe for concurrent use. It does
// not own the client: closing the client (CloseClient) ends the
// subscriptions using it with ErrClosed, and so does Close.
type Registry struct {
	client naming_client.INamingClient
	cfg    config
	log    *zap.Logger
	closed atomic.Bool

	// Connection state, maintained by MonitorConnection while it runs:
	// healthySince is when the client was last seen connecting (unix ns),
	// 0 while it is not connected.
	monitoring   atomic.Bool
	healthySince atomic.Int64
	// The SDK reports a closed client only through the error of a call:
	// while disconnected, one Subscribe every shutdownProbeInterval still
	// calls the SDK (lastProbe, unix ns) to find out; clientClosed
	// remembers the answer for every subscription.
	lastProbe    atomic.Int64
	clientClosed atomic.Bool

	mu     sync.Mutex
	subs   map[subscriber.Sink]*sub
	groups map[string]*group // by SDK cache key
}

// group serializes the SDK calls of one key.
type group struct {
	mu   sync.Mutex // held during SDK Subscribe/Unsubscribe calls
	refs int        // subs + operations in flight, under Registry.mu
	subs map[*sub]struct{}
}

// sub is the adapter's state for one Sink.
type sub struct {
	key   subscriber.Key
	sink  subscriber.Sink
	g     *group
	gkey  string
	param *vo.SubscribeParam // stable: the SDK identifies the callback by &param.SubscribeCallback

	registered bool // our callback is in the SDK's list (guarded by g.mu)

	active atomic.Bool
	mu     sync.Mutex // serializes deliveries to sink
	calls  uint64     // callback invocations, under mu
}

// NewRegistry returns a Registry over client. It returns ErrNilClient for a
// nil client.
func NewRegistry(client naming_client.INamingClient, opts ...Option) (*Registry, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	cfg := config{poll: DefaultPollInterval, downPoll: DefaultDownPollInterval, settle: DefaultSettle}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if !cfg.nsSet {
		if cc, ok := client.(interface {
			GetClientConfig() (constant.ClientConfig, error)
		}); ok {
			if c, err := cc.GetClientConfig(); err == nil {
				cfg.namespace, cfg.nsSet = c.NamespaceId, true
			}
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
		client: client,
		cfg:    cfg,
		log:    log.With(zap.String("component", "subscriber/nacos")),
		subs:   make(map[subscriber.Sink]*sub),
		groups: make(map[string]*group),
	}, nil
}

// Close marks the Registry closed: Subscribe returns ErrClosed from now on
// (which stops the Manager's subscriptions for good) and MonitorConnection
// returns. It does not close the SDK client. Idempotent.
func (r *Registry) Close() { r.closed.Store(true) }

// Subscribe implements subscriber.Registry: one SDK Subscribe call for
// sink, preceded by an SDK Unsubscribe of sink's previous registration if
// there is one (so the SDK holds exactly one callback for sink, and the
// call reaches the server). It returns nil when the SDK returns nil, after
// making sure sink got the current list.
func (r *Registry) Subscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.closed.Load() || r.clientClosed.Load() {
		return ErrClosed
	}
	if sink == nil {
		return rebound.Permanent(fmt.Errorf("%w: nil sink", ErrInvalidKey))
	}
	s, err := r.acquire(key, sink)
	if err != nil {
		return err
	}
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if err := r.connected(s.registered); err != nil && !r.probeDue() {
		// Calling the SDK while it is disconnected only produces errors
		// after its request timeout, and a request that fails just as the
		// client reconnects makes the SDK mark the new connection unhealthy
		// again: do not call it (but for a rare probe, see lastProbe).
		return &Error{Op: "subscribe", Key: key, Err: err}
	}
	if s.registered {
		// Remove our callback (and the SDK's stale state) before adding it
		// again. Its error is not the attempt's: the Subscribe below tells.
		uerr := r.client.Unsubscribe(s.param)
		s.registered = false
		if isShutdown(uerr) {
			r.clientClosed.Store(true)
			return ErrClosed
		}
		r.log.Debug("unsubscribed before resubscribing", zap.Stringer("key", key), zap.Error(uerr))
	}
	s.mu.Lock()
	before := s.calls
	s.mu.Unlock()
	s.active.Store(true)
	err = r.client.Subscribe(s.param)
	s.registered = true // the SDK appended the callback before sending
	if err != nil {
		if isShutdown(err) {
			r.clientClosed.Store(true)
			return ErrClosed
		}
		return &Error{Op: "subscribe", Key: key, Err: err}
	}
	r.ensureList(s, before)
	return nil
}

// connected returns nil if the SDK may be called now: the client is
// connected and, for a confirmation of a subscription the SDK already holds,
// has been for the settle time (see WithSettle).
func (r *Registry) connected(confirm bool) error {
	if !r.monitoring.Load() {
		if !r.client.ServerHealthy() {
			return ErrNotConnected
		}
		return nil
	}
	since := r.healthySince.Load()
	if since == 0 {
		return ErrNotConnected
	}
	if up := time.Since(time.Unix(0, since)); confirm && up < r.cfg.settle {
		return fmt.Errorf("%w (reconnected %v ago, settling)", ErrNotConnected, up.Round(time.Millisecond))
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

// ensureList delivers the SDK's cached list to s.sink if the callback did
// not fire during Subscribe (the SDK skips the callback when it already
// had the service cached, for example for a second subscription of a key).
func (r *Registry) ensureList(s *sub, before uint64) {
	s.mu.Lock()
	fired := s.calls != before
	s.mu.Unlock()
	if fired {
		return
	}
	// Not under s.mu: on a cache miss GetService subscribes again and the
	// SDK runs the callbacks (ours too) from this goroutine.
	svc, err := r.client.GetService(vo.GetServiceParam{
		ServiceName: s.param.ServiceName, GroupName: s.param.GroupName, Clusters: s.param.Clusters,
	})
	if err != nil {
		r.log.Debug("reading the cached list failed", zap.Stringer("key", s.key), zap.Error(err))
		return
	}
	list := convert(svc.Hosts)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A callback that ran meanwhile delivered a list at least as new.
	if s.calls == before && s.active.Load() {
		s.sink.Update(list)
	}
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
	s.g.mu.Lock()
	var err error
	if s.registered {
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
		o.Resubscribe(fmt.Errorf("nacos: another subscription of %s unsubscribed", key))
	}
	switch {
	case err == nil:
		return nil
	case isShutdown(err):
		return ErrClosed
	default:
		return &Error{Op: "unsubscribe", Key: key, Err: err}
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
		g = &group{subs: make(map[*sub]struct{})}
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
		return rebound.Permanent(fmt.Errorf("%w %s: "+format, append([]any{ErrInvalidKey, key}, args...)...))
	}
	if key.Service == "" {
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

// callback is the SDK callback of one subscription (one func value per
// subscription, at one stable address).
func (s *sub) callback(hosts []model.Instance, err error) {
	if err != nil || !s.active.Load() {
		return
	}
	list := convert(hosts)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.active.Load() {
		s.sink.Update(list)
	}
}

// convert copies the SDK's instances (which stay in its cache).
func convert(hosts []model.Instance) []subscriber.Instance {
	out := make([]subscriber.Instance, len(hosts))
	for i, h := range hosts {
		out[i] = subscriber.Instance{
			ID:        h.InstanceId,
			IP:        h.Ip,
			Port:      h.Port,
			Weight:    h.Weight,
			Healthy:   h.Healthy,
			Enabled:   h.Enable,
			Ephemeral: h.Ephemeral,
			Cluster:   h.ClusterName,
			Metadata:  maps.Clone(h.Metadata),
		}
	}
	return out
}

// isShutdown reports whether err is the SDK's error for a closed client
// ("client not connected, current status:SHUTDOWN", rpc_client.go).
func isShutdown(err error) bool {
	return err != nil && strings.Contains(err.Error(), "status:SHUTDOWN")
}

// MonitorConnection implements subscriber.ConnectionMonitor by polling the
// client's ServerHealthy (see the package documentation): it reports
// Disconnected at once if the client is not connected when it starts and
// whenever a connected client loses its connection, and Connected once a
// client that was disconnected has stayed connected for the settle time
// (WithSettle) plus a random part of it (up to once more), so that the
// SDK's own redo has run before the Manager confirms its subscriptions and
// clients reconnecting together do not confirm together. It runs until ctx is done (it returns nil) or
// the Registry is closed (ErrClosed). While it runs, Subscribe consults its
// view of the connection instead of calling ServerHealthy.
func (r *Registry) MonitorConnection(ctx context.Context, report func(subscriber.ConnState)) error {
	r.monitoring.Store(true)
	defer r.monitoring.Store(false)
	const (
		down = iota
		settling
		up
	)
	state := up
	var wait time.Duration // the settle time of the current reconnect
	if r.client.ServerHealthy() {
		// Connected before we looked: nothing to settle.
		r.healthySince.Store(time.Now().Add(-r.cfg.settle).UnixNano())
	} else {
		state = down
		r.healthySince.Store(0)
		report(subscriber.Disconnected)
	}
	t := time.NewTimer(r.interval(state != down))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if r.closed.Load() {
			return ErrClosed
		}
		h := r.client.ServerHealthy()
		switch {
		case !h && state != down:
			r.log.Debug("connection lost")
			r.healthySince.Store(0)
			if state == up {
				report(subscriber.Disconnected)
			}
			state = down
		case h && state == down:
			// Settle for a time drawn from [settle, 2*settle): clients
			// that reconnect together (after a registry restart) then
			// confirm their subscriptions at different times.
			wait = r.cfg.settle + rand.N(r.cfg.settle+1)
			r.log.Debug("connected again; settling", zap.Duration("settle", wait))
			r.healthySince.Store(time.Now().UnixNano())
			state = settling
		}
		if state == settling && time.Since(time.Unix(0, r.healthySince.Load())) >= wait {
			state = up
			report(subscriber.Connected)
		}
		t.Reset(r.interval(state != down))
	}
}

func (r *Registry) interval(healthy bool) time.Duration {
	if healthy {
		return r.cfg.poll
	}
	return r.cfg.downPoll
}

var (
	_ subscriber.Registry          = (*Registry)(nil)
	_ subscriber.ConnectionMonitor = (*Registry)(nil)
)
