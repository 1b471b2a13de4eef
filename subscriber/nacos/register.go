package nacos

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client/naming_grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/regstate"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Registration.
const (
	// DefaultRedoGrace is how long a Registration waits after the client
	// reconnected before it asks the server whether the SDK's own redo
	// registered the instance again (the check is spread over
	// [grace, 1.5 x grace] so that many registrations do not ask at
	// once).
	DefaultRedoGrace = time.Second
	// DefaultCheckInterval is how often a registered instance is checked
	// against the server's list while nothing else happens, to find an
	// instance the server lost without closing the connection (a failed
	// Distro sync between Nacos nodes, an operator's deregistration). Each
	// check is one ServiceQueryRequest; the interval is jittered by ±25 %.
	// An instance listed with other values (weight, enabled, metadata) is
	// registered again once; if a later check finds other values again
	// (before an Update), they are the server's (an operator's edit, another client's copy
	// of the address) and are left, with a warning, until an Update.
	DefaultCheckInterval = 30 * time.Second
)

var (
	// ErrConflict is wrapped by the *rebound.ArgumentError Register returns
	// for a second registration of a service from the same client: Nacos
	// 2.x keeps one instance per service per client connection (the
	// second register request would replace the first instance, and the
	// SDK keeps one redo entry per service), so rebound refuses it. Use
	// another client for another instance of the same service.
	ErrConflict = errors.New("nacos: the client already registers an instance of this service (Nacos keeps one per service per connection)")
	// ErrNotListed is the reason of a repair: the server's list of the
	// service does not hold the instance (after a reconnect, the SDK's
	// redo failed or was rejected; or the server lost it).
	ErrNotListed = errors.New("nacos: the server does not list the instance")
)

// A RegisterOption configures Register. WithLogger configures it too. A
// nil RegisterOption is ignored.
type RegisterOption interface{ applyRegister(*regConfig) }

type registerOptionFunc func(*regConfig)

func (f registerOptionFunc) applyRegister(c *regConfig) { f(c) }

type regConfig struct {
	log       *zap.Logger
	policy    rebound.Policy
	retryOpts []rebound.Option
	grace     time.Duration
	check     time.Duration
	obs       []rebound.Observer
	meter     metric.MeterProvider
	errs      []error
}

func (c *regConfig) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos." + fn, Arg: arg, Reason: reason})
}

// WithRegisterPolicy sets the backoff between a registration's failed
// repair attempts (checks, re-registrations, deregistrations in
// Shutdown). Default: the zero rebound.Policy (full jitter, 1 s doubling
// to 30 s). p must be valid and must leave MaxAttempts and MaxElapsed
// zero: a registration keeps trying until it is stopped.
func WithRegisterPolicy(p rebound.Policy) RegisterOption {
	return registerOptionFunc(func(c *regConfig) {
		if err := p.Validate(); err != nil {
			c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos.WithRegisterPolicy", Arg: "p", Reason: "must be valid", Err: err})
			return
		}
		if p.MaxAttempts != 0 || p.MaxElapsed != 0 {
			c.bad("WithRegisterPolicy", "p", "must leave MaxAttempts and MaxElapsed zero (a registration retries until it is stopped)")
			return
		}
		c.policy = p
	})
}

// WithRegisterRetryOptions passes options to the rebound.Retrier of the
// registration's repairs: share a rebound.WithLimiter, rebound.WithBudget
// or rebound.WithThrottle among many registrations (a sidecar holding
// thousands) so that a registry restart does not make them all retry at
// once. The Schedule admits each attempt when it is due: the first check
// after a reconnect (or a periodic one) as a first attempt (the budget's
// deposit), every later attempt, Shutdown's retries included, as a retry
// (a limiter token). A refusal by the budget, the throttle or a breaker
// defers the attempt to the next backoff step (rebound.RefuseDefer,
// whatever a rebound.WithRefusal among opts says): a registration never
// gives up on a local refusal. Default: none.
func WithRegisterRetryOptions(opts ...rebound.Option) RegisterOption {
	return registerOptionFunc(func(c *regConfig) { c.retryOpts = append(c.retryOpts, opts...) })
}

// WithRedoGrace sets how long after a reconnect the registration waits
// for the SDK's redo before it checks the server's list (see
// DefaultRedoGrace). d must be positive.
func WithRedoGrace(d time.Duration) RegisterOption {
	return registerOptionFunc(func(c *regConfig) {
		if d <= 0 {
			c.bad("WithRedoGrace", "d", fmt.Sprintf("must be > 0; got %v", d))
			return
		}
		c.grace = d
	})
}

// WithCheckInterval sets how often a registered instance is checked
// against the server's list while connected (see DefaultCheckInterval).
// 0 disables the periodic check (the instance is still checked after
// every reconnect). d must not be negative.
func WithCheckInterval(d time.Duration) RegisterOption {
	return registerOptionFunc(func(c *regConfig) {
		if d < 0 {
			c.bad("WithCheckInterval", "d", fmt.Sprintf("must be >= 0; got %v", d))
			return
		}
		c.check = d
	})
}

// WithRegistrationObserver adds o as an observer of the registration's
// state changes and requests (see subscriber.RegistrationHooks, the typed
// adapter, for the events and the guarantees). Several add up; a nil o is
// ignored. Default: none.
func WithRegistrationObserver(o rebound.Observer) RegisterOption {
	if rebound.IsNilObserver(o) {
		return nil
	}
	return registerOptionFunc(func(c *regConfig) { c.obs = append(c.obs, o) })
}

// WithMeterProvider records the registration's OpenTelemetry metrics with
// mp, on the meter "github.com/rebound-go/rebound", with
// registry="nacos": rebound.registration.registrations{state} (1 for its
// current state), rebound.registration.requests{op, result} and
// rebound.registration.repairs, all observable (one collection callback
// per Registration, unregistered when it stops). Register only; default
// (and for nil): no metrics; no global MeterProvider is used.
func WithMeterProvider(mp metric.MeterProvider) RegisterOption {
	return registerOptionFunc(func(c *regConfig) { c.meter = mp })
}

// Registration keeps one ephemeral instance registered with a Nacos 2.x
// server through a nacos-sdk-go/v2 naming client (see Register). Create it
// with Register (the zero value is not usable); stop it with Shutdown
// (deregisters) or Close (stops repairing). It implements
// subscriber.Registration; its methods are safe for concurrent use.
type Registration struct {
	client naming_client.INamingClient
	h      *hub
	slot   string // the hub's key of the service: group@@service
	cfg    regConfig
	log    *zap.Logger
	track  *regstate.Tracker
	key    subscriber.Key
	group  string

	retrier *rebound.Retrier
	events  chan connEvent // from the hub's monitor (capacity 1, latest wins)
	updates chan regUpdate
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop ends

	mu   sync.Mutex
	inst model.Instance // what is registered (the loop's copy is authoritative)

	stopOnce sync.Once
	shut     chan struct{} // capacity 1: held by the Shutdown or Close running
	shutDone bool          // a Shutdown finished (under shut)
	shutErr  error         // its result (under shut)
	released bool          // the slot was given back (under shut)
	closeReq atomic.Bool   // Close ran while a Shutdown held shut
}

// connEvent is a connection transition seen by the hub's monitor.
type connEvent struct{ up bool }

type regUpdate struct {
	ctx  context.Context
	inst model.Instance
	done chan error // buffered (1)
}

// Register registers inst as an ephemeral instance of key's service
// through client, and keeps it registered until Shutdown or Close.
//
// Register makes the first registration itself (one RegisterInstance,
// with Ephemeral set: the gRPC path) and returns its error with nothing
// left running: a *subscriber.OpError wrapping ErrRejected when the server
// refused the request in its own response type (Nacos' TPS control, its
// auth filter, which nacos-sdk-go v2.3.2 reports as success),
// ErrNotConnected, the SDK's error, or ErrClosed (matching
// rebound.ErrClosed) for a closed client. A failed first registration is
// also removed from the SDK's redo cache, so a later reconnect does not
// register it behind the caller's back. The SDK's call cannot be
// cancelled: it is bounded by the client's TimeoutMs (about three times,
// with the SDK's retries), and ctx is checked before it.
//
// Bad input is a *rebound.ArgumentError: a nil ctx; a nil (or typed-nil)
// client; an empty Service, "@@" in Service or Group, Clusters set (the
// instance's cluster is inst.Cluster), a Namespace other than the
// client's; an empty or blank inst.IP (the zero Instance), a Port of 0 or above
// 65535, a negative, NaN or infinite Weight; a bad option. A second
// registration of the same service (Group and Service) from the same
// client, while the first is not stopped, is a *rebound.ArgumentError
// wrapping ErrConflict: Nacos 2.x keeps one instance per service per
// connection, so it would silently replace the first.
//
// The instance is registered as given: Weight, Enabled (false hides it
// from subscribers), Healthy, Cluster (empty: Nacos' DEFAULT) and
// Metadata; inst.ID is ignored (the server names instances). An instance
// with Enabled, Healthy and Weight all zero is refused
// (subscriber.CheckRegistrable): no consumer would pick it.
//
// After that, one goroutine keeps it registered. The client's connection
// is watched by one goroutine per client (polling ServerHealthy, shared by
// the client's Registrations). When the client reconnects, the SDK's redo
// re-sends its cached registrations once, but counts a rejected one as
// done; so, WithRedoGrace after the reconnect, the registration asks the
// server (one ServiceQueryRequest on a connection of its own per client,
// bypassing the SDK's cache) whether it lists the instance. If it does,
// nothing is sent; if not, it registers the instance again, retrying
// through the rebound.Schedule of WithRegisterPolicy and
// WithRegisterRetryOptions until the server accepts. The same check runs
// every WithCheckInterval while connected, which finds an instance the
// server lost without dropping the connection. Nothing is sent while the
// client is disconnected.
//
// Close the Registrations of a client (Shutdown or Close) before closing
// the client: a Registration over a closed client stays repairing.
//
// Options: WithLogger, WithRegisterPolicy, WithRegisterRetryOptions,
// WithRedoGrace, WithCheckInterval, WithRegistrationObserver,
// WithMeterProvider; a nil option is ignored.
func Register(ctx context.Context, client naming_client.INamingClient, key subscriber.Key, inst subscriber.Instance, opts ...RegisterOption) (*Registration, error) {
	const fn = "nacos.Register"
	arg := func(name, reason string) error { return &rebound.ArgumentError{Func: fn, Arg: name, Reason: reason} }
	if ctx == nil {
		return nil, arg("ctx", "must not be nil")
	}
	if nilness.Is(client) {
		return nil, arg("client", "must not be nil")
	}
	if !reflect.TypeOf(client).Comparable() {
		return nil, arg("client", fmt.Sprintf("must be of a comparable type (a pointer, as the SDK's); got %T", client))
	}
	switch {
	case strings.TrimSpace(key.Service) == "":
		return nil, arg("key.Service", "must not be empty")
	case strings.Contains(key.Service, "@@") || strings.Contains(key.Group, "@@"):
		return nil, arg("key", fmt.Sprintf(`must not contain "@@" in Service or Group (Nacos' separator); got %q`, key.String()))
	case len(key.Clusters) > 0:
		return nil, arg("key.Clusters", "must be empty (an instance's cluster is inst.Cluster)")
	case strings.TrimSpace(inst.IP) == "":
		return nil, arg("inst.IP", fmt.Sprintf("must not be empty or only white space (a zero Instance is not an instance); got %q", inst.IP))
	case inst.Port == 0 || inst.Port > math.MaxUint16:
		return nil, arg("inst.Port", fmt.Sprintf("must be in 1..65535; got %d", inst.Port))
	case inst.Weight < 0 || math.IsNaN(inst.Weight) || math.IsInf(inst.Weight, 0):
		return nil, arg("inst.Weight", fmt.Sprintf("must be a finite number >= 0; got %v", inst.Weight))
	case strings.Contains(inst.Cluster, ","):
		return nil, arg("inst.Cluster", fmt.Sprintf("must not contain a comma; got %q", inst.Cluster))
	}
	if err := subscriber.CheckRegistrable(fn, inst); err != nil {
		return nil, err
	}
	if key.Namespace != "" {
		if ns, ok := clientNamespace(client); ok && ns != key.Namespace {
			return nil, arg("key.Namespace", fmt.Sprintf("must be the client's namespace %q or empty; got %q", ns, key.Namespace))
		}
	}
	cfg := regConfig{grace: DefaultRedoGrace, check: DefaultCheckInterval}
	for _, o := range opts {
		if o != nil {
			o.applyRegister(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	// A local refusal defers the attempt, whatever the options say (a
	// budget's default rule, RefuseStop, would end the loop): a
	// registration retries until it is stopped.
	retrier, err := rebound.NewRetrier(cfg.policy, append(cfg.retryOpts[:len(cfg.retryOpts):len(cfg.retryOpts)],
		rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer),
		rebound.WithRefusal(rebound.GateThrottle, rebound.RefuseDefer),
		rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseDefer))...)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := cfg.log
	if log == nil {
		log = zap.NewNop()
	}
	group := key.Group
	if group == "" {
		group = constant.DEFAULT_GROUP
	}
	inst.Ephemeral = true
	inst.ID = ""
	g := &Registration{
		client:  client,
		slot:    group + "@@" + key.Service,
		cfg:     cfg,
		log:     log.With(zap.String("component", "subscriber/nacos"), zap.Stringer("key", key), zap.String("instance", fmt.Sprintf("%s:%d", inst.IP, inst.Port))),
		key:     key,
		group:   group,
		retrier: retrier,
		events:  make(chan connEvent, 1),
		updates: make(chan regUpdate),
		done:    make(chan struct{}),
		shut:    make(chan struct{}, 1),
		inst:    toModel(inst),
	}
	h, err := acquireHub(client, g)
	if err != nil {
		return nil, err
	}
	g.h = h
	g.track = regstate.New("nacos", key, inst, cfg.obs, g.log)
	if err := g.track.StartMetrics(cfg.meter); err != nil {
		h.release(g)
		return nil, &rebound.ArgumentError{Func: "nacos.WithMeterProvider", Arg: "mp", Reason: "could not create the instruments", Err: err}
	}
	if err := g.register(subscriber.RegistrationOpRegister, g.inst); err != nil {
		// The SDK cached the instance for its redo before sending: remove
		// it (a deregister request, which the SDK sends even when it
		// cannot reach the server, and the redo entry goes either way).
		_, _ = client.DeregisterInstance(g.deregisterParam())
		h.release(g)
		g.track.Set(subscriber.RegistrationStopped, err)
		return nil, err
	}
	g.track.Registered()
	var lctx context.Context
	lctx, g.cancel = context.WithCancel(context.Background())
	h.attach(g)
	go g.loop(lctx)
	return g, nil
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

func toModel(in subscriber.Instance) model.Instance {
	md := make(map[string]string, len(in.Metadata))
	for k, v := range in.Metadata {
		md[k] = v
	}
	return model.Instance{
		Ip:          in.IP,
		Port:        in.Port,
		Weight:      in.Weight,
		Healthy:     in.Healthy,
		Enable:      in.Enabled,
		Ephemeral:   true,
		ClusterName: in.Cluster,
		Metadata:    md,
	}
}

func (g *Registration) registerParam(in model.Instance) vo.RegisterInstanceParam {
	md := make(map[string]string, len(in.Metadata))
	for k, v := range in.Metadata {
		md[k] = v
	}
	return vo.RegisterInstanceParam{
		Ip:          in.Ip,
		Port:        in.Port,
		Weight:      in.Weight,
		Enable:      in.Enable,
		Healthy:     in.Healthy,
		Metadata:    md,
		ClusterName: in.ClusterName,
		ServiceName: g.key.Service,
		GroupName:   g.group,
		Ephemeral:   true,
	}
}

func (g *Registration) deregisterParam() vo.DeregisterInstanceParam {
	g.mu.Lock()
	in := g.inst
	g.mu.Unlock()
	return vo.DeregisterInstanceParam{
		Ip:          in.Ip,
		Port:        in.Port,
		Cluster:     in.ClusterName,
		ServiceName: g.key.Service,
		GroupName:   g.group,
		Ephemeral:   true,
	}
}

// sdkErr maps an SDK error of op.
func (g *Registration) sdkErr(op string, err error) error {
	if isShutdown(err) {
		return &subscriber.OpError{Registry: "nacos", Op: op, Key: g.key.String(), Err: &sdkError{err: err, is: ErrClosed}}
	}
	return opError(op, g.key, err)
}

// register sends one register request for in (the first, a repair or an
// update) and reports it to the observers as op.
func (g *Registration) register(op string, in model.Instance) error {
	start := time.Now()
	ok, err := g.client.RegisterInstance(g.registerParam(in))
	switch {
	case err != nil:
		err = g.sdkErr("register", err)
	case !ok:
		err = opError("register", g.key, ErrRejected)
	}
	g.track.Attempt(op, start, err)
	return err
}

// listed asks the server (not the SDK's cache) whether it lists in's
// address (found) and with in's values (same).
func (g *Registration) listed(op string, in model.Instance) (found, same bool, err error) {
	start := time.Now()
	found, same, err = g.h.listed(g.key.Service, g.group, in)
	if err != nil {
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLookupUnsupported) {
			err = opError("check", g.key, err)
		}
	}
	g.track.Attempt(op, start, err)
	return found, same, err
}

// Key returns the key given to Register.
func (g *Registration) Key() subscriber.Key { return g.track.Key() }

// Instance returns the registered instance (Register's, or the last
// successful Update's), Ephemeral set and ID empty.
func (g *Registration) Instance() subscriber.Instance { return g.track.Instance() }

// Status returns a snapshot of the registration.
func (g *Registration) Status() subscriber.RegistrationStatus { return g.track.Status() }

// Work the loop has to do.
const (
	needNothing  = iota
	needCheck    // ask the server whether it lists the instance
	needRegister // register it again
)

// loop keeps the instance registered until ctx is done.
func (g *Registration) loop(ctx context.Context) {
	defer close(g.done)
	var (
		need = needNothing
		up   = true
		s    *rebound.Schedule // the current repair run; nil when none
		// other: the instance was registered again because the server
		// listed it with other values; if it does again at a later
		// check (before an Update), they are the server's (an
		// operator's weight, another client's copy of the address), and
		// registering again would only fight them at every check.
		other   bool
		left    bool                // the other values were left (logged once)
		kind    rebound.AttemptKind // the attempt the timer is the wait for
		timer   = time.NewTimer(time.Hour)
		periodT = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()
	defer periodT.Stop()
	armPeriodic := func() {
		periodT.Stop()
		if g.cfg.check > 0 {
			periodT.Reset(jitter(g.cfg.check, 0.75, 1.25))
		}
	}
	armPeriodic()
	// begin starts a repair run whose first attempt is due after d (a
	// grace, not a backoff): the Schedule admits it when it is due.
	begin := func(d time.Duration) {
		timer.Stop()
		if s != nil {
			s.Decide(time.Now(), rebound.Abandoned())
		}
		s = g.retrier.NewSchedule(time.Now())
		kind = rebound.FirstAttempt
		if d <= 0 {
			d = time.Nanosecond
		}
		timer.Reset(d)
	}
	// attempt does the pending work; false: stop for good.
	attempt := func() bool {
		if !up || need == needNothing {
			return true
		}
		g.mu.Lock()
		in := g.inst
		g.mu.Unlock()
		var err error
		if need == needCheck {
			var found, same bool
			found, same, err = g.listed(subscriber.RegistrationOpCheck, in)
			switch {
			case err == nil && found && (same || other):
				switch {
				case !same && !left:
					g.log.Warn("the server lists the instance with other values (weight, enabled or metadata) after registering it again; leaving them")
					left = true
				case same && g.track.State() == subscriber.RegistrationRepairing:
					g.log.Debug("the server lists the instance (the SDK's redo worked)")
				}
				if same {
					// other stays: a server that took the values back
					// and then lists others again (two clients taking the
					// address from each other) is not fought either.
					left = false
				}
				need = needNothing
			case err == nil && found:
				g.log.Info("the server lists the instance with other values (weight, enabled or metadata); registering it again")
				g.track.Set(subscriber.RegistrationRepairing, ErrNotListed)
				other = true
				need = needRegister
			case err == nil:
				g.log.Info("the server does not list the instance; registering it again")
				g.track.Set(subscriber.RegistrationRepairing, ErrNotListed)
				need = needRegister
			}
		}
		if err == nil && need == needRegister {
			if err = g.register(subscriber.RegistrationOpRegister, in); err == nil {
				g.log.Info("registered again")
				g.track.Registered()
				// Registered before the repair is counted, so that a
				// Status showing the repair shows it registered.
				g.track.Set(subscriber.RegistrationRegistered, nil)
				g.track.Repaired()
				need = needNothing
			}
		}
		now := time.Now()
		if err == nil {
			if s != nil {
				s.Decide(now, rebound.Succeeded())
				s = nil
			}
			g.track.Set(subscriber.RegistrationRegistered, nil)
			armPeriodic()
			return true
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrLookupUnsupported) {
			if s != nil {
				// The admitted attempt's token and breaker admission go
				// back: the loop ends without its outcome.
				s.Decide(now, rebound.Abandoned())
				s = nil
			}
			g.log.Error("registration stopped", zap.Error(err))
			g.track.Set(subscriber.RegistrationStopped, err)
			return false
		}
		g.track.Set(subscriber.RegistrationRepairing, err)
		if s == nil {
			s = g.retrier.NewSchedule(now)
		}
		dec := s.Decide(now, rebound.Failed(err))
		g.track.SetAttempts(dec.Attempt)
		if dec.Verdict != rebound.WaitFor {
			g.log.Error("registration stopped", zap.Error(dec.Err))
			g.track.Set(subscriber.RegistrationStopped, dec.Err)
			return false
		}
		g.log.Debug("registration repair failed", zap.Int("attempt", dec.Attempt), zap.Duration("next", dec.Delay), zap.Error(err))
		kind = rebound.RetryAttempt
		timer.Reset(dec.Delay)
		return true
	}
	for {
		select {
		case <-ctx.Done():
			if s != nil {
				s.Decide(time.Now(), rebound.Abandoned())
			}
			return
		case ev := <-g.events:
			if !ev.up {
				up = false
				timer.Stop()
				periodT.Stop()
				g.track.Set(subscriber.RegistrationRepairing, subscriber.ErrDisconnected)
				if need == needNothing {
					need = needCheck
				}
				continue
			}
			up = true
			if need == needNothing {
				need = needCheck
			}
			// Give the SDK's redo time to register the instance, then
			// look for the evidence.
			begin(jitter(g.cfg.grace, 1, 1.5))
		case <-periodT.C:
			if need == needNothing && up {
				need = needCheck
				begin(0)
			}
		case <-timer.C:
			if s == nil || !up || need == needNothing {
				continue // nothing to do (attempt would do nothing either)
			}
			// The attempt is due: the Schedule admits it (the gates of
			// its kind: WithRegisterRetryOptions), or says how long to
			// wait (a limiter token: the same attempt; a local refusal's
			// backoff: then a retry), or stops the loop.
			dec := s.Decide(time.Now(), rebound.Ready(kind))
			g.track.SetAttempts(dec.Attempt) // a local refusal counts
			switch dec.Verdict {
			case rebound.WaitFor:
				if !errors.Is(dec.Reason, rebound.ErrLimited) {
					kind = rebound.RetryAttempt
				}
				timer.Reset(dec.Delay)
				continue
			case rebound.Stop, rebound.Drop:
				g.log.Error("registration stopped", zap.Error(dec.Err))
				g.track.Set(subscriber.RegistrationStopped, dec.Err)
				return
			}
			if !attempt() {
				return
			}
		case u := <-g.updates:
			err := g.update(u)
			u.done <- err
			if err == nil {
				other, left = false, false // new values: a difference is news again
			}
			if err == nil && up && need == needNothing {
				// A re-send by the SDK's redo that raced the update
				// (its copy taken before) would put the old values back:
				// check after the grace, as after a reconnect.
				need = needCheck
				begin(jitter(g.cfg.grace, 1, 1.5))
			}
		}
	}
}

// update sends u's instance (in the loop goroutine).
func (g *Registration) update(u regUpdate) error {
	if err := u.ctx.Err(); err != nil {
		return err
	}
	err := g.register(subscriber.RegistrationOpUpdate, u.inst)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.inst = u.inst
	g.mu.Unlock()
	return nil
}

// sameRegistered reports whether the server's instance x carries what
// in registered: its weight, enabled flag and metadata (the server may
// add metadata keys of its own).
func sameRegistered(x, in model.Instance) bool {
	if x.Weight != in.Weight || x.Enable != in.Enable {
		return false
	}
	for k, v := range in.Metadata {
		if x.Metadata[k] != v {
			return false
		}
	}
	return true
}

// jitter returns d scaled by a random factor in [lo, hi).
func jitter(d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + rand.Float64()*(hi-lo)))
}

// Update changes the registered instance (weight, metadata, enabled,
// healthy): one register request with the new instance, which Nacos
// applies in place (its connection's instance of the service is
// replaced), checked against the server after the redo grace (a re-send
// of the old instance by the SDK's redo racing the Update is then
// registered over). It returns once the server accepted it, or the error (a
// *subscriber.OpError, wrapping ErrRejected for a rejection). After a
// failed Update the Registration keeps reporting and repairing the
// previous instance, but the server and the SDK's redo cache may hold
// either until an Update succeeds. The address and cluster must not change (another instance:
// Register it), a *rebound.ArgumentError, as is a bad Weight or one that
// CheckRegistrable refuses (Enabled, Healthy and Weight all zero). After
// Shutdown or Close it returns an error matching
// subscriber.ErrRegistrationStopped. The SDK's call is not cancelled by
// ctx (it is bounded by the client's TimeoutMs); ctx bounds the wait for
// it.
func (g *Registration) Update(ctx context.Context, inst subscriber.Instance) error {
	const fn = "nacos.Registration.Update"
	if ctx == nil {
		return &rebound.ArgumentError{Func: fn, Arg: "ctx", Reason: "must not be nil"}
	}
	cur := g.Instance()
	switch {
	case inst.IP != cur.IP || inst.Port != cur.Port || inst.Cluster != cur.Cluster:
		return &rebound.ArgumentError{Func: fn, Arg: "inst", Reason: fmt.Sprintf(
			"must keep the address and cluster %s:%d/%q (another one is another instance: Register it); got %s:%d/%q",
			cur.IP, cur.Port, cur.Cluster, inst.IP, inst.Port, inst.Cluster)}
	case inst.Weight < 0 || math.IsNaN(inst.Weight) || math.IsInf(inst.Weight, 0):
		return &rebound.ArgumentError{Func: fn, Arg: "inst.Weight", Reason: fmt.Sprintf("must be a finite number >= 0; got %v", inst.Weight)}
	}
	if err := subscriber.CheckRegistrable(fn, inst); err != nil {
		return err
	}
	inst.Ephemeral, inst.ID = true, ""
	u := regUpdate{ctx: ctx, inst: toModel(inst), done: make(chan error, 1)}
	select {
	case g.updates <- u:
	case <-g.done:
		return &subscriber.OpError{Registry: "nacos", Op: "update", Key: g.key.String(), Err: subscriber.ErrRegistrationStopped}
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-u.done:
		if err == nil {
			g.track.SetInstance(inst)
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop ends the loop (bounded by ctx) and gives the service's slot on the
// client back.
func (g *Registration) stop(ctx context.Context) error {
	g.cancel()
	select {
	case <-g.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.stopOnce.Do(func() { g.h.detach(g) })
	return nil
}

// Close stops repairing, at once and without a request: the instance stays
// registered while the client's connection lives (the SDK's redo also
// keeps re-sending it after reconnects, as it does for any instance the
// client registered). Use Shutdown to deregister. Close is idempotent,
// returns once the Registration's goroutine has ended, and returns nil.
func (g *Registration) Close() error {
	_ = g.stop(context.Background())
	select {
	case g.shut <- struct{}{}:
	default:
		// A Shutdown is running: it gives the slot back and ends in
		// stopped (even if its ctx ends first); Close does not wait for
		// its requests.
		g.closeReq.Store(true)
		return nil
	}
	if !g.released {
		g.released = true
		g.h.release(g)
	}
	<-g.shut
	g.track.Set(subscriber.RegistrationStopped, nil)
	return nil
}

// Shutdown stops repairing and deregisters the instance: a deregister
// request (which also removes the SDK's redo entry, so no later reconnect
// registers it again), then a query of the server's list; it returns nil
// once the server no longer lists the instance, retrying both (through
// the registration's policy) until then or until ctx is done (it then
// returns ctx's error, or the last attempt's). A closed client counts as
// deregistered once the server's list confirms it (its connection
// closed, so the server dropped its instances). Shutdown may follow
// Close; if another Registration of the same service on the same client
// was made in between (Nacos then holds its instance in place of this
// one), Shutdown sends nothing and returns nil, so as not to deregister
// that one. Later calls return the first one's result, unless it ended
// on ctx, in which case they try again.
func (g *Registration) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return &rebound.ArgumentError{Func: "nacos.Registration.Shutdown", Arg: "ctx", Reason: "must not be nil"}
	}
	if err := g.stop(ctx); err != nil {
		return err
	}
	select {
	case g.shut <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.shut }()
	if g.shutDone {
		return g.shutErr
	}
	if g.released {
		// Close gave the slot back: take it again for the deregistration,
		// unless another Registration of the service holds it. Nacos then
		// holds that one's instance in place of this one, and a deregister
		// request (which removes the connection's instance of the service
		// whatever address it names, and the SDK's redo entry of the
		// service) would remove it.
		h, ok := reclaimHub(g.client, g)
		if !ok {
			g.log.Info("shutdown after close: another registration of the service on the client replaced the instance; nothing to deregister")
			g.shutDone, g.shutErr = true, nil
			g.track.Set(subscriber.RegistrationStopped, nil)
			return nil
		}
		g.h, g.released = h, false
	}
	err := g.deregister(ctx)
	if err != nil && ctx.Err() != nil && !g.closeReq.Load() {
		// Not finished: a later call tries again.
		return err
	}
	g.shutDone, g.shutErr = true, err
	if !g.released {
		g.released = true
		g.h.release(g)
	}
	g.track.Set(subscriber.RegistrationStopped, err)
	return err
}

// deregister deregisters and confirms, retrying until ctx is done.
func (g *Registration) deregister(ctx context.Context) error {
	g.track.Set(subscriber.RegistrationDeregistering, nil)
	s := g.retrier.NewSchedule(time.Now())
	g.mu.Lock()
	in := g.inst
	g.mu.Unlock()
	var (
		last     error
		admitted bool // the attempt was admitted by the Schedule (a retry): it hears how it went
	)
	for {
		err := g.deregisterOnce(in)
		if err == nil {
			if admitted {
				s.Decide(time.Now(), rebound.Succeeded())
			}
			return nil
		}
		last = err
		if errors.Is(err, ErrLookupUnsupported) {
			if admitted {
				s.Decide(time.Now(), rebound.Abandoned()) // the confirmation cannot be made
			}
			return err
		}
		// The Schedule decides: the delay, then the retry's admission
		// (the gates of WithRegisterRetryOptions), waited until ctx is
		// done.
		dec := s.Decide(time.Now(), rebound.Failed(err))
		for dec.Verdict == rebound.WaitFor {
			g.track.SetAttempts(dec.Attempt)
			if werr := rebound.Wait(ctx, dec.Delay, nil); werr != nil {
				s.Decide(time.Now(), rebound.Abandoned())
				return errors.Join(werr, last)
			}
			dec = s.Decide(time.Now(), rebound.Ready(rebound.RetryAttempt))
		}
		if dec.Verdict != rebound.AttemptNow {
			return dec.Err
		}
		admitted = true
	}
}

// deregisterOnce sends a deregister request (unless the server no longer
// lists the instance) and checks that the server no longer lists it.
func (g *Registration) deregisterOnce(in model.Instance) error {
	start := time.Now()
	ok, err := g.client.DeregisterInstance(g.deregisterParam())
	switch {
	case err != nil && isShutdown(err):
		// The client is closed: its connection too. Confirm below.
		err = nil
	case err != nil:
		err = g.sdkErr("deregister", err)
	case !ok:
		err = opError("deregister", g.key, ErrRejected)
	}
	g.track.Attempt(subscriber.RegistrationOpDeregister, start, err)
	if err != nil {
		return err
	}
	found, _, err := g.listed(subscriber.RegistrationOpDeregister, in)
	if err != nil {
		return err
	}
	if found {
		// A redo that raced with the deregister request registered it
		// again, or the server has not applied it yet.
		return opError("deregister", g.key, errors.New("the server still lists the instance"))
	}
	return nil
}

var _ subscriber.Registration = (*Registration)(nil)

// hubs holds the per-client state shared by the client's Registrations.
var hubs = struct {
	mu sync.Mutex
	m  map[naming_client.INamingClient]*hub
}{m: map[naming_client.INamingClient]*hub{}}

// hub is what a client's Registrations share: the slots (one registration
// per service), the connection monitor, the query connection.
type hub struct {
	client naming_client.INamingClient

	// Under hubs.mu.
	slots map[string]*Registration // held from Register to Shutdown/Close
	regs  map[*Registration]struct{}
	stopM context.CancelFunc
	doneM chan struct{}

	qmu    sync.Mutex
	query  *naming_grpc.NamingGrpcProxy
	qclose context.CancelFunc
}

// acquireHub takes the service's slot on client's hub for g.
func acquireHub(client naming_client.INamingClient, g *Registration) (*hub, error) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[client]
	if h == nil {
		h = &hub{client: client, slots: map[string]*Registration{}, regs: map[*Registration]struct{}{}}
		hubs.m[client] = h
	}
	if _, taken := h.slots[g.slot]; taken {
		if len(h.slots) == 0 {
			delete(hubs.m, client)
		}
		return nil, &rebound.ArgumentError{Func: "nacos.Register", Arg: "key",
			Reason: fmt.Sprintf("must not name a service the client already registers (%s): Nacos keeps one instance per service per connection", g.slot),
			Err:    ErrConflict}
	}
	h.slots[g.slot] = g
	return h, nil
}

// reclaimHub takes the service's slot on client's hub for g again (after
// Close gave it back); false if another Registration holds it.
func reclaimHub(client naming_client.INamingClient, g *Registration) (*hub, bool) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[client]
	if h == nil {
		h = &hub{client: client, slots: map[string]*Registration{}, regs: map[*Registration]struct{}{}}
		hubs.m[client] = h
	}
	if other, taken := h.slots[g.slot]; taken && other != g {
		return nil, false
	}
	h.slots[g.slot] = g
	return h, true
}

// attach starts delivering connection events to g (and the monitor with
// the first Registration).
func (h *hub) attach(g *Registration) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h.regs[g] = struct{}{}
	if h.stopM == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.stopM, h.doneM = cancel, make(chan struct{})
		go h.monitor(ctx, h.doneM)
	}
}

// detach stops delivering connection events to g.
func (h *hub) detach(g *Registration) {
	var stop context.CancelFunc
	var done chan struct{}
	hubs.mu.Lock()
	delete(h.regs, g)
	if len(h.regs) == 0 && h.stopM != nil {
		stop, done = h.stopM, h.doneM
		h.stopM, h.doneM = nil, nil
	}
	hubs.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// release gives g's slot back; the last one closes the query connection.
func (h *hub) release(g *Registration) {
	hubs.mu.Lock()
	if h.slots[g.slot] == g {
		delete(h.slots, g.slot)
	}
	last := len(h.slots) == 0
	if last && hubs.m[h.client] == h {
		delete(hubs.m, h.client)
	}
	hubs.mu.Unlock()
	if last {
		h.qmu.Lock()
		if h.query != nil {
			h.query.CloseClient()
			h.qclose()
			h.query = nil
		}
		h.qmu.Unlock()
	}
}

// monitor polls the client's ServerHealthy (every 100 ms while connected,
// every second while not: the SDK then tries HTTP) and tells the
// Registrations of every transition.
func (h *hub) monitor(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	up := h.client.ServerHealthy()
	t := time.NewTimer(DefaultPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := h.client.ServerHealthy()
		if now != up {
			up = now
			h.broadcast(connEvent{up: up})
		}
		if up {
			t.Reset(DefaultPollInterval)
		} else {
			t.Reset(DefaultDownPollInterval)
		}
	}
}

func (h *hub) broadcast(ev connEvent) {
	hubs.mu.Lock()
	regs := make([]*Registration, 0, len(h.regs))
	for g := range h.regs {
		regs = append(regs, g)
	}
	hubs.mu.Unlock()
	for _, g := range regs {
		// Capacity 1, the latest transition wins: drop a stale one. The
		// monitor is the only sender, so the send then succeeds.
		select {
		case <-g.events:
		default:
		}
		select {
		case g.events <- ev:
		default:
		}
	}
}

// listed queries the server's list of the service (all clusters, healthy
// or not) on the hub's own connection and reports whether it holds in's
// address (found), and with in's values (same).
func (h *hub) listed(service, group string, in model.Instance) (found, same bool, err error) {
	p, err := h.queryProxy()
	if err != nil {
		return false, false, err
	}
	svc, err := p.QueryInstancesOfService(service, group, "", 0, false)
	if err != nil {
		return false, false, err
	}
	if svc == nil || svc.LastRefTime == 0 {
		return false, false, ErrRejected
	}
	cluster := in.ClusterName
	if cluster == "" {
		cluster = defaultCluster
	}
	for _, x := range svc.Hosts {
		c := x.ClusterName
		if c == "" {
			c = defaultCluster
		}
		if x.Ip == in.Ip && x.Port == in.Port && c == cluster {
			// Listed as registered only with the values this
			// Registration sent: a stale copy (the SDK's redo re-sending
			// the instance as it was before an Update) is not.
			if sameRegistered(x, in) {
				return true, true, nil
			}
			found = true
		}
	}
	return found, false, nil
}

func (h *hub) queryProxy() (*naming_grpc.NamingGrpcProxy, error) {
	h.qmu.Lock()
	defer h.qmu.Unlock()
	if h.query != nil {
		return h.query, nil
	}
	p, cancel, err := newQueryProxy(h.client, "", "register")
	if err != nil {
		return nil, err
	}
	h.query, h.qclose = p, cancel
	return p, nil
}

// defaultCluster is the cluster Nacos gives an instance registered
// without one.
const defaultCluster = "DEFAULT"
