package nacos

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// Defaults of a registration (see withRedoGrace and withCheckInterval).
const (
	defaultRedoGrace     = time.Second
	defaultCheckInterval = 30 * time.Second
)

var (
	// errConflict is wrapped by the *rebound.ArgumentError Register returns
	// for a second registration of a service from the same client: Nacos
	// 2.x keeps one instance per service per client connection (the
	// second register request would replace the first instance, and the
	// SDK keeps one redo entry per service), so rebound refuses it. Use
	// another client for another instance of the same service.
	errConflict = errors.New("nacos: the client already registers an instance of this service (Nacos keeps one per service per connection)")
	// errNotListed is the reason of a repair: the server's list of the
	// service does not hold the instance (after a reconnect, the SDK's
	// redo failed or was rejected; or the server lost it).
	errNotListed = errors.New("nacos: the server does not list the instance")
)

type regConfig struct {
	log       *zap.Logger
	policy    rebound.Policy
	retryOpts []rebound.Option
	grace     time.Duration
	check     time.Duration
	obs       []rebound.Observer
	meter     metric.MeterProvider
	errs      []error
	retrier   *rebound.Retrier // made by Register from the above
	dereg     *rebound.Retrier // Shutdown's, compiled with retrier: the options' checks (a limiter's burst) may fail later
}

func (c *regConfig) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos." + fn, Arg: arg, Reason: reason})
}

// WithPolicy sets the backoff of a registration's repairs and
// the options of their rebound.Retrier (Register only): share a limiter,
// budget or throttle among many registrations there. Default: the zero
// rebound.Policy, no options. p must be valid; a registration never
// stops (limits in opts are ignored), and a local refusal defers an attempt.
// rebound.WithObserver observes the registration's events (a
// RegistrationEvent) and the Retrier's (nil Detail: repairs and refusals);
// WithMeterProvider records the registration's metrics too.
// A later WithPolicy replaces p and adds its options to these.
func WithPolicy(p rebound.Policy, opts ...rebound.Option) Option {
	return regOption{"WithPolicy", func(c *regConfig) {
		if _, err := rebound.NewRetrier(p); err != nil {
			c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos.WithPolicy", Arg: "p", Reason: "must be valid", Err: err})
			return
		}
		c.policy = p
		// The observers and the meter are the registration's too.
		e := admit.Engine(opts)
		c.obs = append(c.obs, admit.Observers[rebound.Observer](e)...)
		if e.MeterProvider != nil {
			c.meter = e.MeterProvider
		}
		c.retryOpts = append(c.retryOpts, opts...) // a second call keeps the first one's options
	}}
}

// withRedoGrace sets how long after a reconnect a registration waits for
// the SDK's redo before it checks the server's list (Register only; the
// check is spread over [d, 1.5 x d]). Default: 1 s; d must be positive.
func withRedoGrace(d time.Duration) Option {
	return regOption{"WithRedoGrace", func(c *regConfig) {
		if d <= 0 {
			c.bad("WithRedoGrace", "d", fmt.Sprintf("must be > 0; got %v", d))
			return
		}
		c.grace = d
	}}
}

// withCheckInterval sets how often a registered instance is checked
// against the server's list while connected, ±25% (Register only).
// Default: 30 s; 0 turns the periodic check off. d must be 0 or at least
// 1 ms. docs/providers.md says what a check repairs.
func withCheckInterval(d time.Duration) Option {
	return regOption{"WithCheckInterval", func(c *regConfig) {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			c.bad("WithCheckInterval", "d", fmt.Sprintf("must be 0 (no periodic check) or at least 1ms; got %v", d))
			return
		}
		c.check = d
	}}
}

// registration keeps one ephemeral instance registered with a Nacos 2.x
// server through a nacos-sdk-go/v2 naming client (see Register).
//
// Its state is one allocation (the tracker, the loop and its timer held
// by value), the configuration is shared by the registrations made with
// no options, and the instance is kept once: docs/measurements.md has
// the bytes.
type registration struct {
	h     *hub       // its client is the registration's
	conn  *connState // h's from Register on, not changed by a reclaim
	slot  string     // the hub's key of the service: group@@service
	cfg   *regConfig // not modified once Register made it
	track regstate.Tracker

	loop regstate.Loop // the repair loop's steps; no goroutine while idle
	rep  repairer      // the loop's state (its steps' only)

	// The registered instance is the tracker's (one copy of its
	// Metadata, shared with the SDK's redo cache and never modified).
	mu      sync.Mutex
	sent    *model.Instance // the last register request's when not the registered one (the SDK's redo copy)
	shutCh  chan struct{}   // capacity 1: held by the Shutdown or Close running; made by the first (under mu)
	shutErr error           // the result of a finished Shutdown (under shut)

	connUp   atomic.Bool // the latest connection transition of the hub's monitor
	connNew  atomic.Bool // a step for it is posted (the latest wins)
	closeReq atomic.Bool // Close ran while a Shutdown held shut
	settled  bool        // Register returned (under hubs.mu)
	attached bool        // h sends it connection events (under hubs.mu)
	detached bool        // stop detached it from the hub (under mu)
	shutDone bool        // a Shutdown finished (under shut)
	released bool        // the slot was given back (under shut)
}

type regUpdate struct {
	ctx  context.Context
	inst model.Instance
	sub  subscriber.Instance // inst as Instance reports it
	done chan error          // buffered (1)
	// state: updatePending, then updateAdopted by the loop (the server
	// accepted it in time) or updateAbandoned by Update (its ctx ended).
	state *atomic.Int32
}

const (
	updatePending = iota
	updateAdopted
	updateAbandoned
)

// Register registers inst as an ephemeral instance of key's service and
// keeps it registered until Shutdown or Close (docs/providers.md). The
// first registration is made before Register returns; its error (a
// "nacos: register ..." error, wrapping ErrRejected for a refusal the SDK reports
// as success) leaves nothing running. Bad input, or a second Register of
// one service on one client, is a *rebound.ArgumentError.
//
// Update sends one register request: Nacos replaces the instance in
// place. Shutdown deregisters and returns once the server no longer lists
// the instance with its values. Close only stops repairing: the instance
// stays while the client's connection lives. Close a client's
// Registrations before the client.
func Register(ctx context.Context, client naming_client.INamingClient, key subscriber.Key, inst subscriber.Instance, opts ...Option) (subscriber.Registration, error) {
	if err := checkRegister(ctx, client, key, inst); err != nil {
		return nil, err
	}
	cfg, err := registerConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	group := key.Group
	if group == "" {
		group = constant.DEFAULT_GROUP
	}
	inst.Ephemeral = true
	inst.ID = ""
	inst = regstate.CloneInstance(inst) // the one copy
	g := &registration{slot: group + "@@" + key.Service, cfg: cfg}
	h, prev, err := acquireHub(client, g)
	if err != nil {
		return nil, err
	}
	g.h, g.conn = h, &h.conn
	defer settle(g)
	if err := g.first(key, inst, prev); err != nil {
		return nil, err
	}
	return g, nil
}

// registerConfig applies Register's options. With none, it returns the
// configuration the registrations made with none share.
func registerConfig(opts []Option) (*regConfig, error) {
	cfg := regConfig{grace: defaultRedoGrace, check: defaultCheckInterval}
	given := false
	for _, o := range opts {
		if o != nil {
			o.applyRegister(&cfg)
			given = true
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	def, err := defaultRegConfig()
	if err != nil || !given {
		return def, err
	}
	cfg.retrier, cfg.dereg = def.retrier, def.dereg // they hold no per-loop state
	if len(cfg.retryOpts) > 0 || cfg.policy != (rebound.Policy{}) {
		if cfg.retrier, err = compileRegisterRetrier(cfg); err != nil {
			return nil, err
		}
		if cfg.dereg, err = compileRegisterRetrier(cfg, admit.First(0).(rebound.Option)); err != nil {
			return nil, err
		}
	}
	cfg.log = componentLog(cfg.log)
	return &cfg, nil
}

// defaultRegConfig is the configuration of the registrations made with
// no options. Its Retrier is also the one of those made with neither a
// policy nor rebound options.
var defaultRegConfig = sync.OnceValues(func() (*regConfig, error) {
	cfg := regConfig{grace: defaultRedoGrace, check: defaultCheckInterval, log: componentLog(nil)}
	var err error
	cfg.retrier, err = compileRegisterRetrier(cfg)
	if err == nil {
		cfg.dereg, err = compileRegisterRetrier(cfg, admit.First(0).(rebound.Option))
	}
	return &cfg, err
})

func componentLog(log *zap.Logger) *zap.Logger {
	if log == nil {
		log = zap.NewNop()
	}
	return log.With(zap.String("component", "subscriber/nacos"))
}

// logger is the registration's logger. It is made for each line (lines
// are few), so that a registration keeps no logger of its own.
func (g *registration) logger() *zap.Logger {
	in := g.track.SharedInstance()
	return g.cfg.log.With(zap.Stringer("key", g.Key()), zap.String("instance", fmt.Sprintf("%s:%d", in.IP, in.Port)))
}

// debug reports whether the registration's Debug lines are logged.
func (g *registration) debug() bool { return g.cfg.log.Core().Enabled(zap.DebugLevel) }

// service and group are the key's, with Nacos' default group.
func (g *registration) service() string { return g.slot[strings.Index(g.slot, "@@")+2:] }
func (g *registration) group() string   { return g.slot[:strings.Index(g.slot, "@@")] }

// shut is the registration's Shutdown and Close semaphore.
func (g *registration) shut() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutCh == nil {
		g.shutCh = make(chan struct{}, 1)
	}
	return g.shutCh
}

// checkRegister checks Register's arguments.
func checkRegister(ctx context.Context, client naming_client.INamingClient, key subscriber.Key, inst subscriber.Instance) error {
	const fn = "nacos.Register"
	arg := func(name, reason string) error { return &rebound.ArgumentError{Func: fn, Arg: name, Reason: reason} }
	if ctx == nil {
		return arg("ctx", "must not be nil")
	}
	if nilness.Is(client) {
		return arg("client", "must not be nil")
	}
	if !reflect.TypeOf(client).Comparable() {
		return arg("client", fmt.Sprintf("must be of a comparable type (a pointer, as the SDK's); got %T", client))
	}
	switch {
	case strings.TrimSpace(key.Service) == "":
		return arg("key.Service", "must not be empty")
	case strings.Contains(key.Service, "@@") || strings.Contains(key.Group, "@@"):
		return arg("key", fmt.Sprintf(`must not contain "@@" in Service or Group (Nacos' separator); got %q`, key.String()))
	case len(key.Clusters) > 0:
		return arg("key.Clusters", "must be empty (an instance's cluster is inst.Cluster)")
	case strings.TrimSpace(inst.IP) == "":
		return arg("inst.IP", fmt.Sprintf("must not be empty or only white space (a zero Instance is not an instance); got %q", inst.IP))
	case inst.Port == 0 || inst.Port > math.MaxUint16:
		return arg("inst.Port", fmt.Sprintf("must be in 1..65535; got %d", inst.Port))
	case inst.Weight < 0 || math.IsNaN(inst.Weight) || math.IsInf(inst.Weight, 0):
		return arg("inst.Weight", fmt.Sprintf("must be a finite number >= 0; got %v", inst.Weight))
	case strings.Contains(inst.Cluster, ","):
		return arg("inst.Cluster", fmt.Sprintf("must not contain a comma; got %q", inst.Cluster))
	}
	if err := regstate.CheckRegistrable(fn, inst); err != nil {
		return err
	}
	if key.Namespace != "" {
		if ns, ok := clientNamespace(client); ok && ns != key.Namespace {
			return arg("key.Namespace", fmt.Sprintf("must be the client's namespace %q or empty; got %q", ns, key.Namespace))
		}
	}
	return nil
}

// compileRegisterRetrier is the Retrier of a registration's attempts. A
// local refusal defers the attempt, whatever the options say (a budget's
// default rule, admit.Stop, would end the loop), and no limit applies: a
// registration retries until it is stopped. more come last (Shutdown's
// Retrier adds admit.First(0)).
func compileRegisterRetrier(cfg regConfig, more ...rebound.Option) (*rebound.Retrier, error) {
	return rebound.NewRetrier(cfg.policy, append(append(cfg.retryOpts[:len(cfg.retryOpts):len(cfg.retryOpts)],
		admit.Refuse(admit.Budget, admit.Defer).(rebound.Option),
		admit.Refuse(admit.Throttle, admit.Defer).(rebound.Option),
		admit.Refuse(admit.Breaker, admit.Defer).(rebound.Option),
		rebound.WithMaxAttempts(0), rebound.WithMaxElapsed(0)), more...)...)
}

// first makes the first registration and starts the loop. On failure it
// gives the service's slot back, and its ownership to prev, the
// Registration whose instance the connection held before (nil if none).
func (g *registration) first(key subscriber.Key, inst subscriber.Instance, prev *registration) error {
	g.track.Init("nacos", key, inst, g.cfg.obs, g.cfg.log)
	if err := g.track.StartMetrics(g.cfg.meter); err != nil {
		setOwner(g.h.client, g.slot, prev)
		g.h.release(g)
		return &rebound.ArgumentError{Func: "nacos.WithPolicy", Arg: "opts", Reason: "could not create the instruments", Err: err}
	}
	if err := g.register(regstate.OpRegister, toModel(inst)); err != nil {
		g.undoFirst(prev)
		g.h.release(g)
		g.track.Set(subscriber.RegistrationStopped, err)
		return err
	}
	g.track.Registered()
	g.startLoop()
	g.h.attach(g)
	return nil
}

// undoFirst removes what a failed first registration left behind: the
// SDK cached the instance for its redo before sending. With no previous
// owner, a deregister request removes it (the SDK sends it even when it
// cannot reach the server, and drops the redo entry either way). Else the
// connection holds prev's instance (a closed Registration's, which stays
// while the connection lives), unless the failed request replaced it: a
// deregister request would remove it, so prev's instance is registered
// again, which puts it back in the SDK's redo cache too.
func (g *registration) undoFirst(prev *registration) {
	if prev == nil {
		_, _ = g.h.client.DeregisterInstance(g.deregisterParam())
		disown(g.h.client, g)
		return
	}
	in := prev.current()
	if ok, err := g.h.client.RegisterInstance(prev.registerParam(in)); err != nil || !ok {
		g.logger().Warn("could not give the service back to the closed registration before this one (the SDK's redo will)",
			zap.String("previous", fmt.Sprintf("%s:%d", in.Ip, in.Port)), zap.Bool("accepted", ok), zap.Error(err))
	}
	setOwner(g.h.client, g.slot, prev)
}

// clientNamespace returns the client's namespace when it tells.
func clientNamespace(client naming_client.INamingClient) (string, bool) {
	cc, ok := client.(interface {
		GetClientConfig() (constant.ClientConfig, error)
	})
	if !ok {
		return "", false
	}
	c, err := cc.GetClientConfig()
	if err != nil {
		return "", false
	}
	if c.NamespaceId == "" {
		return constant.DEFAULT_NAMESPACE_ID, true
	}
	return c.NamespaceId, true
}

// current returns the registered instance; its Metadata is shared.
func (g *registration) current() model.Instance { return toModel(g.track.SharedInstance()) }

// toModel converts in, sharing its Metadata map.
func toModel(in subscriber.Instance) model.Instance {
	return model.Instance{
		Ip:          in.IP,
		Port:        in.Port,
		Weight:      in.Weight,
		Healthy:     in.Healthy,
		Enable:      in.Enabled,
		Ephemeral:   true,
		ClusterName: in.Cluster,
		Metadata:    in.Metadata,
	}
}

// registerParam is the request for in. Its Metadata map is shared: the
// SDK keeps it in its redo cache and never modifies it.
func (g *registration) registerParam(in model.Instance) vo.RegisterInstanceParam {
	return vo.RegisterInstanceParam{
		Ip:          in.Ip,
		Port:        in.Port,
		Weight:      in.Weight,
		Enable:      in.Enable,
		Healthy:     in.Healthy,
		Metadata:    in.Metadata,
		ClusterName: in.ClusterName,
		ServiceName: g.service(),
		GroupName:   g.group(),
		Ephemeral:   true,
	}
}

func (g *registration) deregisterParam() vo.DeregisterInstanceParam {
	in := g.track.SharedInstance()
	return vo.DeregisterInstanceParam{
		Ip:          in.IP,
		Port:        in.Port,
		Cluster:     in.Cluster,
		ServiceName: g.service(),
		GroupName:   g.group(),
		Ephemeral:   true,
	}
}

// sdkErr maps an SDK error of op.
func (g *registration) sdkErr(op string, err error) error {
	if isShutdown(err) {
		return opErr(op, g.Key(), &sdkError{err: err, is: errClosed})
	}
	return opError(op, g.Key(), err)
}

// register sends one register request for in (the first, a repair or an
// update) and reports it to the observers as op.
func (g *registration) register(op string, in model.Instance) error {
	start := time.Now()
	// The SDK caches in for its redo before it sends it.
	var sent *model.Instance
	if op == regstate.OpUpdate {
		sent = &in
	}
	g.mu.Lock()
	g.sent = sent
	g.mu.Unlock()
	ok, err := g.h.client.RegisterInstance(g.registerParam(in))
	switch {
	case err != nil:
		err = g.sdkErr("register", err)
	case !ok:
		err = opError("register", g.Key(), ErrRejected)
	}
	g.track.Attempt(op, start, err)
	return err
}

// listed asks the server (not the SDK's cache) whether it lists in's
// address (found) and with in's values (same).
func (g *registration) listed(op string, in model.Instance) (found, same bool, err error) {
	start := time.Now()
	found, same, err = g.h.listed(g.service(), g.group(), in)
	if err != nil {
		if !errors.Is(err, errClosed) && !errors.Is(err, errLookupUnsupported) {
			err = opError("check", g.Key(), err)
		}
	}
	g.track.Attempt(op, start, err)
	return found, same, err
}

// Key returns the key given to Register.
func (g *registration) Key() subscriber.Key { return g.track.Key() }

// Instance returns the registered instance (Register's, or the last
// successful Update's), Ephemeral set and ID empty.
func (g *registration) Instance() subscriber.Instance { return g.track.Instance() }

// Status returns a snapshot of the registration.
func (g *registration) Status() subscriber.RegistrationStatus {
	st := g.track.Status()
	if st.State == subscriber.RegistrationRegistered && g.conn.down.Load() && !g.eager() {
		// Not told of the disconnection (hub.broadcast): repairing since.
		if at := time.Unix(0, g.conn.downAt.Load()); st.Since.Before(at) {
			st.State, st.Since = subscriber.RegistrationRepairing, at
		}
	}
	return st
}
