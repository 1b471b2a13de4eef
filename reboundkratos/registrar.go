package reboundkratos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// RegisterFunc registers one instance of key's service through an
// adapter, which keeps it registered until the Registration is stopped.
// It may change key and inst first (a Nacos group, cluster or weight):
//
//	func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
//		return etcd.Register(ctx, client, key, inst, etcd.WithLayout(reboundkratos.EtcdLayout("")))
//	}
type RegisterFunc func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error)

// Registrar is a kratos registry.Registrar over an adapter's
// registrations: pass it to kratos.New with kratos.Registrar. Create it
// with NewRegistrar; it is safe for concurrent use.
type Registrar struct {
	f   Format
	reg RegisterFunc
	o   registrarOptions
	log *zap.Logger

	mu     sync.Mutex
	closed bool
	regs   map[string]*registered // by instance identity (name, ID)
}

type registered struct {
	units []subscriber.Registration // nil while Register is in flight

	// While Register is in flight: cancel ends its attempts, done is
	// closed when it returned. Under Registrar.mu: aborted (a Deregister
	// came during Register: Register leaves its registrations in units
	// for it), orphaned (that Deregister stopped waiting: Register
	// closes them itself).
	cancel   context.CancelFunc
	done     chan struct{}
	aborted  bool
	orphaned bool
}

// NewRegistrar returns a Registrar writing instances in format f through
// register. An unknown f, a nil register or a bad option is a
// *rebound.ArgumentError.
func NewRegistrar(f Format, register RegisterFunc, opts ...Option) (*Registrar, error) {
	o := registrarOptions{cluster: defaultCluster, weight: defaultNacosWeight, drain: defaultDrainDelay}
	if !f.valid() {
		o.bad("NewRegistrar", "f", "must be FormatNacos or FormatEtcd; got "+f.name())
	}
	if register == nil {
		o.bad("NewRegistrar", "register", "is nil (a RegisterFunc is required)")
	}
	applyOptions(&config{fn: "NewRegistrar", r: &o}, opts)
	if f == FormatEtcd && o.group != "" {
		o.bad("NewRegistrar", "opts", "WithGroup does not apply to FormatEtcd (its keys have no group)")
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	return &Registrar{f: f, reg: register, o: o, log: log.With(zap.String("component", "reboundkratos")), regs: make(map[string]*registered)}, nil
}

// unit is one registration of an instance: for FormatNacos one per
// endpoint, for FormatEtcd one.
type unit struct {
	key  subscriber.Key
	inst subscriber.Instance
}

func (r *Registrar) units(eps []endpoint, si *registry.ServiceInstance) ([]unit, error) {
	if r.f == FormatEtcd {
		raw, err := json.Marshal(si)
		if err != nil {
			return nil, &rebound.ArgumentError{Func: "reboundkratos.Registrar.Register", Arg: "service", Reason: "cannot be encoded as JSON", Err: err}
		}
		md := make(map[string]string, len(si.Metadata)+1)
		maps.Copy(md, si.Metadata)
		md[metadataInstance] = string(raw)
		return []unit{{key: subscriber.Key{Service: si.Name}, inst: subscriber.Instance{
			ID: si.ID, IP: eps[0].host, Port: eps[0].port, Weight: defaultNacosWeight,
			Healthy: true, Enabled: true, Ephemeral: true, Cluster: "DEFAULT", Metadata: md,
		}}}, nil
	}
	us := make([]unit, 0, len(eps))
	for _, ep := range eps {
		md := make(map[string]string, len(si.Metadata)+2)
		maps.Copy(md, si.Metadata)
		md[metadataKind] = ep.scheme
		md[metadataVersion] = si.Version
		us = append(us, unit{
			key: subscriber.Key{Group: r.o.group, Service: si.Name + "." + ep.scheme},
			inst: subscriber.Instance{IP: ep.host, Port: ep.port, Weight: r.o.weight, Healthy: true, Enabled: true,
				Ephemeral: true, Cluster: r.o.cluster, Metadata: md},
		})
	}
	return us, nil
}

func identity(si *registry.ServiceInstance) string { return si.Name + "\x00" + si.ID }

// Register implements registry.Registrar: it returns once the registry
// accepted every part of service, retrying with WithPolicy until ctx ends
// (then it deregisters the parts done and returns a *rebound.RetryError).
// A bad instance is a *rebound.ArgumentError; after Close it is ErrClosed.
// docs/kratos.md lists the rules.
func (r *Registrar) Register(ctx context.Context, service *registry.ServiceInstance) error {
	const fn = "reboundkratos.Registrar.Register"
	if ctx == nil {
		return &rebound.ArgumentError{Func: fn, Arg: "ctx", Reason: "is nil"}
	}
	eps, err := checkInstance(fn, r.f, service)
	if err != nil {
		return err
	}
	us, err := r.units(eps, service)
	if err != nil {
		return err
	}
	id := identity(service)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if _, ok := r.regs[id]; ok {
		r.mu.Unlock()
		return &rebound.ArgumentError{Func: fn, Arg: "service", Reason: fmt.Sprintf("(name %q, ID %q) is registered already (Deregister it first)", service.Name, service.ID)}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rg := &registered{cancel: cancel, done: make(chan struct{})}
	defer close(rg.done)
	r.regs[id] = rg
	r.mu.Unlock()
	ctx = rctx

	var done []subscriber.Registration
	for _, u := range us {
		g, err := r.registerOne(ctx, u)
		if err != nil {
			if r.handOver(rg, done) {
				return fmt.Errorf("reboundkratos: register %s: deregistered while registering: %w", service.Name, err)
			}
			return r.registerFailed(ctx, id, rg, service, done, fmt.Errorf("reboundkratos: register %s as %s: %w", service.Name, u.key, err))
		}
		done = append(done, g)
	}
	if r.handOver(rg, done) {
		return fmt.Errorf("reboundkratos: register %s: deregistered while registering: %w", service.Name, context.Canceled)
	}
	r.mu.Lock()
	closed := r.closed
	if !closed {
		rg.units = done
	}
	r.mu.Unlock()
	if closed {
		for _, g := range done {
			_ = g.Close()
		}
		return ErrClosed
	}
	r.log.Info("registered", zap.String("service", service.Name), zap.String("id", service.ID), zap.Strings("endpoints", scrubbed(service.Endpoints)))
	return nil
}

// registerOne registers one part, retrying with the Registrar's policy
// until ctx ends.
func (r *Registrar) registerOne(ctx context.Context, u unit) (subscriber.Registration, error) {
	var g subscriber.Registration
	err := rebound.Retry(ctx, r.o.policy, func(ctx context.Context) error {
		var err error
		g, err = r.reg(ctx, u.key, u.inst)
		if err == nil && g == nil {
			return rebound.Permanent(errors.New("RegisterFunc returned a nil Registration"))
		}
		if err != nil {
			r.log.Debug("register attempt failed", zap.Stringer("key", u.key), zap.Error(err))
		}
		if err != nil && !registerTransient(err) {
			return rebound.Permanent(err) // Retry returns err itself
		}
		return err
	})
	return g, err
}

// handOver gives done to a Deregister that came while Register was in
// flight (true), which deregisters them; or closes them if that
// Deregister gave up waiting.
func (r *Registrar) handOver(rg *registered, done []subscriber.Registration) bool {
	r.mu.Lock()
	aborted, orphaned := rg.aborted, rg.orphaned
	if aborted {
		rg.units = done
	}
	r.mu.Unlock()
	if orphaned {
		for _, g := range done {
			_ = g.Close()
		}
	}
	return aborted
}

// registerFailed undoes a Register whose part could not be registered:
// it deregisters the parts in done (or closes them after Close) and
// returns err (ErrClosed after Close).
func (r *Registrar) registerFailed(ctx context.Context, id string, rg *registered, si *registry.ServiceInstance, done []subscriber.Registration, err error) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		for _, g := range done {
			_ = g.Close()
		}
		return ErrClosed
	}
	// ctx has ended: the cleanup gets a bounded context of its own.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	r.shutdown(cctx, si, done)
	cancel()
	r.mu.Lock()
	if r.regs[id] == rg {
		delete(r.regs, id)
	}
	r.mu.Unlock()
	return err
}

// cleanupTimeout bounds the deregistration of the parts a failed Register
// had registered.
const cleanupTimeout = 10 * time.Second

// registerTransient: every adapter error is worth another attempt but a
// bad argument and a closed client.
func registerTransient(err error) bool {
	return !errors.Is(err, rebound.ErrInvalidArgument) && !errors.Is(err, rebound.ErrClosed)
}

// shutdown deregisters every part, logging failures.
func (r *Registrar) shutdown(ctx context.Context, si *registry.ServiceInstance, gs []subscriber.Registration) bool {
	ok := true
	for _, g := range gs {
		if err := g.Shutdown(ctx); err != nil {
			ok = false
			_ = g.Close()
			r.log.Warn("deregister failed; the instance leaves when the registry drops it",
				zap.String("service", si.Name), zap.String("id", si.ID), zap.Error(err))
		}
	}
	return ok
}

// Deregister implements registry.Registrar: it deregisters service, waits
// WithDrainDelay (or until ctx ends), and returns nil, so that kratos
// stops the servers. A failed deregistration is logged and the instance
// left to expire; a Register in flight is ended first.
func (r *Registrar) Deregister(ctx context.Context, service *registry.ServiceInstance) error {
	const fn = "reboundkratos.Registrar.Deregister"
	if ctx == nil {
		return &rebound.ArgumentError{Func: fn, Arg: "ctx", Reason: "is nil"}
	}
	if service == nil {
		return &rebound.ArgumentError{Func: fn, Arg: "service", Reason: "is nil"}
	}
	id := identity(service)
	r.mu.Lock()
	rg, ok := r.regs[id]
	inflight := ok && rg.units == nil
	if ok {
		delete(r.regs, id)
		rg.aborted = inflight
	}
	r.mu.Unlock()
	if !ok {
		r.log.Warn("deregister: not registered", zap.String("service", service.Name), zap.String("id", service.ID))
		return nil
	}
	if inflight {
		// kratos.App.Stop while App.Run's Register is still trying: end
		// its attempts and deregister what it registered, so that no
		// instance is left registered after Deregister returns.
		rg.cancel()
		select {
		case <-rg.done:
		case <-ctx.Done():
			r.mu.Lock()
			rg.orphaned = true
			units := rg.units // handed over just before: close them here
			r.mu.Unlock()
			for _, g := range units {
				_ = g.Close()
			}
			r.log.Warn("deregister: the registration in flight did not end in time; it is closed when it does (the instance leaves when the registry drops it)",
				zap.String("service", service.Name), zap.String("id", service.ID), zap.Error(ctx.Err()))
			return nil
		}
		r.mu.Lock()
		units := rg.units
		r.mu.Unlock()
		if len(units) == 0 {
			return nil
		}
		rg = &registered{units: units}
	}
	// subscriber.Drain's first two steps; kratos stops the servers when
	// Deregister returns.
	err := subscriber.Drain(ctx, r.o.drain, func(context.Context) error { return nil }, rg.units...)
	for _, g := range rg.units {
		_ = g.Close() // stops a registration whose Shutdown failed; no-op otherwise
	}
	if err != nil {
		r.log.Warn("deregister failed; the instance leaves when the registry drops it",
			zap.String("service", service.Name), zap.String("id", service.ID), zap.Error(err))
	} else {
		r.log.Info("deregistered and drained", zap.String("service", service.Name), zap.String("id", service.ID), zap.Duration("delay", r.o.drain))
	}
	return nil
}

// Close stops every Registration without deregistering and makes Register
// return ErrClosed. It is idempotent and returns nil.
func (r *Registrar) Close() error {
	r.mu.Lock()
	var gs []subscriber.Registration
	if !r.closed {
		r.closed = true
		for id, rg := range r.regs {
			gs = append(gs, rg.units...)
			if rg.units == nil && rg.cancel != nil {
				rg.cancel() // a Register in flight: it returns ErrClosed
			}
			delete(r.regs, id)
		}
	}
	r.mu.Unlock()
	for _, g := range gs {
		_ = g.Close()
	}
	return nil
}

// scrubbed returns eps with credentials scrubbed (logging.Scrub): a
// strings field passes the logger's redaction unread.
func scrubbed(eps []string) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = logging.Scrub(e)
	}
	return out
}
