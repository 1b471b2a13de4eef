package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// registration keeps one instance registered: its key is bound to a
// lease that the client's hub keeps alive, and its steps (regstate.Loop)
// repair it; waiting, it is entries of the hub and of sched, and no
// goroutine (see Register).
type registration struct {
	client *clientv3.Client
	opts   registerOptions
	log    *zap.Logger
	layout Layout
	prefix string // the service's prefix (one watch per client and prefix)
	key    string // the instance's etcd key
	value  string // its value; written by the loop's steps
	ttl    int64  // seconds
	track  *regstate.Tracker

	retrier  *rebound.Retrier
	hub      *hub
	ctx      context.Context // bounds the steps' requests; cancelled by stop
	cancel   context.CancelFunc
	loop     *regstate.Loop
	h        holder    // the loop's state, owned by its steps
	left     func()    // waits for the hub's goroutines that leaving stopped; set when the loop ends
	leftOnce sync.Once // left runs once

	lease atomic.Int64 // the lease the instance is bound to

	mu        sync.Mutex
	revoking  bool          // a Shutdown revokes (or revoked) the lease; under mu
	revoked   chan struct{} // closed when that revocation ends
	revokeErr error         // its result, set before revoked is closed
}

// Register registers inst under key's service on a lease of WithTTL's TTL
// and keeps it registered until Shutdown or Close (docs/providers.md).
// The first registration is made before Register returns, bounded by ctx;
// its error leaves nothing running. Bad input (key.Clusters set, no IP, a
// Port outside 1..65535, a bad Weight, or Enabled, Healthy and Weight all
// zero) is a *rebound.ArgumentError.
//
// Update puts the new value on the current lease (while another lease
// holds the key, it only records it). Shutdown revokes the lease, retried
// until ctx is done (then a *rebound.RetryError). Close only stops: the
// key goes when the lease expires.
func Register(ctx context.Context, client *clientv3.Client, key subscriber.Key, inst subscriber.Instance, opts ...Option) (subscriber.Registration, error) {
	if err := checkRegister(ctx, client, key, inst); err != nil {
		return nil, err
	}
	o, err := newRegisterOptions(opts)
	if err != nil {
		return nil, err
	}
	ttl := int64(sat.RoundUp(o.ttl, time.Second) / time.Second) // WithTTL bounds it
	retrier, err := newRepairRetrier(o.policy, ttl)
	if err != nil {
		return nil, &rebound.ArgumentError{Func: "etcd.WithPolicy", Arg: "p", Reason: "must be valid", Err: err}
	}
	layout := o.resolvedLayout()
	prefix, err := layout.ServicePrefix(key)
	if err != nil {
		return nil, err
	}
	inst.Ephemeral = true
	id, value, err := encodeKeyValue(layout, inst)
	if err != nil {
		return nil, err
	}
	k := prefix + id
	log := o.log.With(zap.String("component", "subscriber/etcd"), zap.String("key", k))
	g := &registration{
		client:  client,
		opts:    o,
		log:     log,
		layout:  layout,
		prefix:  prefix,
		key:     k,
		value:   string(value),
		ttl:     ttl,
		track:   regstate.New(registryName, key, inst, o.obs, log),
		retrier: retrier,
		revoked: make(chan struct{}),
	}
	if err := g.track.StartMetrics(o.meter); err != nil {
		return nil, &rebound.ArgumentError{Func: "etcd.WithMeterProvider", Arg: "mp", Reason: "could not create the instruments", Err: err}
	}
	if err := g.start(ctx); err != nil {
		g.track.Set(subscriber.RegistrationStopped, err)
		return nil, err
	}
	return g, nil
}

// checkRegister checks Register's arguments.
func checkRegister(ctx context.Context, client *clientv3.Client, key subscriber.Key, inst subscriber.Instance) error {
	const fn = "Register"
	switch {
	case ctx == nil:
		return argErr(fn, "ctx", "must not be nil")
	case client == nil:
		return argErr(fn, "client", "must not be nil")
	case len(key.Clusters) > 0:
		return argErr(fn, "key.Clusters", "must be empty (an instance's cluster is inst.Cluster)")
	case strings.TrimSpace(inst.IP) == "":
		return argErr(fn, "inst.IP", fmt.Sprintf("must not be empty or only white space (a zero Instance is not an instance); got %q", inst.IP))
	case inst.Port == 0 || inst.Port > 65535:
		return argErr(fn, "inst.Port", fmt.Sprintf("must be in 1..65535; got %d", inst.Port))
	}
	if err := checkWeight(fn, inst.Weight); err != nil {
		return err
	}
	return regstate.CheckRegistrable("etcd."+fn, inst)
}

// encodeKeyValue is layout.Encode(inst), its error on the ID naming the
// field of inst the ID came from.
func encodeKeyValue(layout Layout, inst subscriber.Instance) (id string, value []byte, err error) {
	id, value, err = layout.Encode(inst)
	var ae *rebound.ArgumentError
	if err != nil && errors.As(err, &ae) && ae.Arg == "id" {
		arg := "inst.ID"
		if inst.ID == "" {
			arg = "inst.IP"
		}
		return "", nil, &rebound.ArgumentError{Func: "etcd.Register", Arg: arg,
			Reason: fmt.Sprintf("must give a valid key segment as the instance ID; got %q", instanceID(inst)), Err: err}
	}
	return id, value, err
}

// defaultRetrier is the Retrier of the registrations with the default
// policy and TTL: a Retrier is safe for concurrent use, and each loop
// draws a Schedule of its own from it.
var defaultRetrier = sync.OnceValues(func() (*rebound.Retrier, error) {
	return rebound.NewRetrier(repairPolicy(rebound.Policy{}, int64(defaultTTL/time.Second)))
})

// newRepairRetrier returns the Retrier of a registration's repairs and
// revocations.
func newRepairRetrier(p rebound.Policy, ttl int64) (*rebound.Retrier, error) {
	if p == (rebound.Policy{}) && ttl == int64(defaultTTL/time.Second) {
		return defaultRetrier()
	}
	return rebound.NewRetrier(repairPolicy(p, ttl))
}

// repairPolicy is p with its waits capped at a third of the lease's TTL
// (ttl seconds), the keep-alive period: the old lease may still live
// while a repair fails (a new leader extends every lease by a TTL), and a
// repair must find it alive before it expires. The cap is the policy's,
// so that the Schedule draws every wait, a Retry-After included.
func repairPolicy(p rebound.Policy, ttl int64) rebound.Policy {
	const minDelay = 500 * time.Microsecond // a Policy's floor of every delay
	p = admit.Normalized(p).(rebound.Policy)
	limit := max(sat.Mul(time.Duration(ttl)*time.Second, 1.0/3), minDelay)
	p.Max = min(p.Max, limit)
	p.Initial = min(p.Initial, p.Max)
	p.MaxRetryAfter = min(p.MaxRetryAfter, p.Max)
	return p
}

// Key returns the service key given to Register.
func (g *registration) Key() subscriber.Key { return g.track.Key() }

// Instance returns the registered instance (Register's, or the last
// successful Update's), Ephemeral set.
func (g *registration) Instance() subscriber.Instance { return g.track.Instance() }

// Status returns a snapshot of the registration. Registrations counts
// the leases granted; Repairs, the keys put back on a living lease.
func (g *registration) Status() subscriber.RegistrationStatus { return g.track.Status() }

// currentLease returns the lease the instance is currently bound to.
func (g *registration) currentLease() clientv3.LeaseID { return clientv3.LeaseID(g.lease.Load()) }

func (g *registration) closed() bool { return g.client.Ctx().Err() != nil }

// permanentIfClosed marks the error of a closed client permanent.
func permanentIfClosed(err error) error {
	if errors.Is(err, subscriber.ErrRegistryClosed) {
		return rebound.Permanent(err)
	}
	return err
}

var (
	_ io.Closer               = (*registration)(nil)
	_ subscriber.Registration = (*registration)(nil)
)
