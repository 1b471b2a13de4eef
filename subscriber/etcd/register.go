package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// registration keeps one instance registered: its key is bound to a
// lease that the client keeps alive, and a goroutine repairs it (see
// Register).
type registration struct {
	client *clientv3.Client
	opts   registerOptions
	log    *zap.Logger
	layout Layout
	key    string // the instance's etcd key
	value  string // its value; written by Register and then only by the loop goroutine
	ttl    int64  // seconds
	track  *regstate.Tracker

	retrier *rebound.Retrier
	cancel  context.CancelFunc
	updates chan update   // Update's requests to the loop goroutine
	done    chan struct{} // closed when the loop ends

	mu    sync.Mutex
	lease clientv3.LeaseID

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
	retrier, err := rebound.NewRetrier(repairPolicy(o.policy, ttl))
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
		key:     k,
		value:   string(value),
		ttl:     ttl,
		track:   regstate.New(registryName, key, inst, o.obs, log),
		retrier: retrier,
		updates: make(chan update),
		revoked: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if err := g.track.StartMetrics(o.meter); err != nil {
		return nil, &rebound.ArgumentError{Func: "etcd.WithMeterProvider", Arg: "mp", Reason: "could not create the instruments", Err: err}
	}
	start := time.Now()
	lease, rev, _, err := g.grantAndPut(ctx, true)
	g.track.Attempt(regstate.OpRegister, start, err)
	if err != nil {
		g.track.Set(subscriber.RegistrationStopped, err)
		return nil, err
	}
	g.lease = lease
	g.track.Registered()
	var lctx context.Context
	lctx, g.cancel = context.WithCancel(context.Background())
	go g.loop(lctx, lease, rev)
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
func (g *registration) currentLease() clientv3.LeaseID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lease
}

func (g *registration) closed() bool { return g.client.Ctx().Err() != nil }

// Work a repair attempt has to do.
const (
	probeLease = 1 << iota // the keep-alive channel closed: does the lease live?
	ensureKey              // the key went, or the watch ended: put it back, watch again
)

// holder is the state of the loop goroutine.
type holder struct {
	g     *registration
	ctx   context.Context
	lease clientv3.LeaseID

	kaCancel context.CancelFunc
	kaCh     <-chan *clientv3.LeaseKeepAliveResponse // nil: not kept alive
	op       string                                  // the kind of request of the last repair (for the observers)
	wCancel  context.CancelFunc
	wCh      clientv3.WatchChan // nil: not watching
	yielded  bool               // another lease holds the key

	pending int               // the repair work due (probeLease, ensureKey)
	failing bool              // the last attempt failed: timer is armed
	sched   *rebound.Schedule // the repairs' run
	timer   *time.Timer       // the wait after a failed repair
}

// loop keeps the instance registered until ctx is done.
func (g *registration) loop(ctx context.Context, lease clientv3.LeaseID, rev int64) {
	defer close(g.done)
	ready := make(chan struct{}, 1)
	defer watchReady(g.client, ready)() // one watcher per client, not per registration

	h := &holder{g: g, ctx: ctx, lease: lease}
	defer h.stopKeepAlive()
	defer h.stopWatch()
	h.keepAlive()
	h.watch(rev)

	h.sched = g.retrier.NewSchedule(time.Now())
	h.timer = time.NewTimer(time.Hour)
	h.timer.Stop()
	defer h.timer.Stop()
	for {
		if h.pending != 0 && !h.failing {
			if !h.run() {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-h.kaCh:
			if !ok {
				h.kaCh = nil
				h.stopKeepAlive()
				g.log.Warn("no keep-alive answer for a TTL (no leader, or unreachable); asking whether the lease lives",
					zap.Int64("lease", int64(h.lease)))
				h.pending |= probeLease
			}
		case wr, ok := <-h.wCh:
			if !ok || wr.Err() != nil {
				h.wCh = nil
				h.stopWatch()
				h.pending |= ensureKey
				continue
			}
			if h.apply(wr.Events) {
				h.pending |= ensureKey
			} else {
				h.pending &^= ensureKey
			}
		case u := <-g.updates:
			u.done <- h.update(u)
		case <-h.timer.C:
			h.failing = false
		case <-ready:
			if h.failing {
				// The connection is back: try at once, from the start
				// of the policy.
				h.timer.Stop()
				h.failing = false
				h.sched.Reset(time.Now())
			}
		}
	}
}

// run makes one repair attempt, as the Schedule decides (Admit, then
// Done); false: stop for good.
func (h *holder) run() bool {
	g := h.g
	g.track.Set(subscriber.RegistrationRepairing, nil)
	a, dec := h.sched.Admit(time.Now())
	var err error
	if !dec.Stop && dec.Delay == 0 { // admitted
		start := time.Now()
		err = h.repair(&h.pending)
		g.track.Attempt(h.op, start, err)
		if err == nil {
			h.failing = false
			a.Done(nil, time.Now())
			if h.pending == 0 {
				g.track.Set(subscriber.RegistrationRegistered, nil)
			}
			return true
		}
		dec = a.Done(err, time.Now())
	}
	g.track.SetAttempts(dec.Attempt)
	if dec.Stop {
		if h.ctx.Err() == nil {
			// Permanent: the client was closed, permission denied.
			// Nothing more can be done; Shutdown and Close still
			// work.
			g.log.Error("registration stopped", zap.Error(dec.Err))
			g.track.Set(subscriber.RegistrationStopped, dec.Err)
		}
		return false
	}
	g.log.Debug("registration repair failed", zap.Int("attempt", dec.Attempt), zap.Duration("next", dec.Delay), zap.Error(err))
	h.failing = true
	h.timer.Reset(dec.Delay)
	return true
}

// apply reads the events of the watch on the key and reports whether the
// key must be put back: it was deleted, or put without a lease. A put on
// another lease is left alone (that lease's holder keeps it; when it lets
// it go, the delete brings it back here).
func (h *holder) apply(events []*clientv3.Event) bool {
	need := false
	for _, ev := range events {
		switch {
		case ev.Type == mvccpb.DELETE:
			need, h.yielded = true, false
		case ev.Kv.Lease == 0:
			need, h.yielded = true, false
		case clientv3.LeaseID(ev.Kv.Lease) == h.lease:
			need, h.yielded = string(ev.Kv.Value) != h.g.value, false
		default:
			if !h.yielded {
				h.g.log.Info("another lease holds the key (another registration of this instance); leaving it",
					zap.Int64("lease", int64(h.lease)), zap.Int64("holder", ev.Kv.Lease))
			}
			need, h.yielded = false, true
		}
	}
	return need
}

// repair makes one attempt at the pending work, bounded by the attempt
// timeout, and clears what it did.
func (h *holder) repair(pending *int) error {
	g := h.g
	ctx, cancel := context.WithTimeout(h.ctx, g.opts.timeout)
	defer cancel()
	h.op = regstate.OpCheck
	if *pending&probeLease != 0 {
		resp, err := g.client.TimeToLive(ctx, h.lease)
		switch {
		case err == nil && resp.TTL > 0:
			g.log.Info("the lease lives; keeping it alive again", zap.Int64("lease", int64(h.lease)), zap.Int64("ttl", resp.TTL))
			h.keepAlive()
			*pending &^= probeLease
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			return h.replaceLease(pending)
		default:
			return permanentIfClosed(classify("timetolive", g.key, err, g.closed()))
		}
	}
	if *pending&ensureKey != 0 {
		rev, err := h.ensure(ctx)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return h.replaceLease(pending)
		}
		if err != nil {
			return permanentIfClosed(classify("put", g.key, err, g.closed()))
		}
		h.stopWatch()
		h.watch(rev)
		*pending &^= ensureKey
	}
	return nil
}

// replaceLease grants a new lease and puts the key on it: the old lease
// is gone.
func (h *holder) replaceLease(pending *int) error {
	g := h.g
	h.op = regstate.OpRegister
	g.log.Warn("lease gone (expired, revoked or lost with the cluster's data); registering again",
		zap.Int64("lease", int64(h.lease)))
	lease, rev, yielded, err := g.grantAndPut(h.ctx, false)
	if err != nil {
		return permanentIfClosed(err)
	}
	old := h.lease
	h.lease = lease
	g.mu.Lock()
	g.lease = lease
	g.mu.Unlock()
	g.track.Registered()
	g.log.Info("registered again", zap.Int64("lease", int64(lease)), zap.Int64("previous", int64(old)))
	h.stopKeepAlive()
	h.keepAlive()
	h.stopWatch()
	h.watch(rev)
	h.yielded = yielded
	if yielded {
		g.log.Info("another lease holds the key (another registration of this instance); leaving it", zap.Int64("lease", int64(lease)))
	}
	*pending = 0
	return nil
}

// ensure makes sure the key is registered: it puts the key on the lease
// if it is missing, without a lease, or on the lease with another value;
// it leaves a key that another lease holds. It returns the revision to
// watch from.
func (h *holder) ensure(ctx context.Context) (int64, error) {
	g := h.g
	resp, err := g.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(g.key), "=", 0)).
		Then(clientv3.OpPut(g.key, g.value, clientv3.WithLease(h.lease))).
		Else(clientv3.OpGet(g.key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		h.repaired("the key was gone; put it back")
		return resp.Header.Revision, nil
	}
	var kv *mvccpb.KeyValue
	if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		kv = rr.Kvs[0]
	}
	switch {
	case kv == nil:
		// Deleted between the compare and the get: cannot happen in one
		// transaction, but put it back anyway.
	case clientv3.LeaseID(kv.Lease) == h.lease && string(kv.Value) == g.value:
		h.yielded = false
		return resp.Header.Revision, nil
	case kv.Lease != 0 && clientv3.LeaseID(kv.Lease) != h.lease:
		h.yielded = true
		return resp.Header.Revision, nil
	}
	pr, err := g.client.Put(ctx, g.key, g.value, clientv3.WithLease(h.lease))
	if err != nil {
		return 0, err
	}
	h.repaired("the key was off any lease or changed; put it back")
	return pr.Header.Revision, nil
}

func (h *holder) repaired(msg string) {
	h.yielded = false
	h.g.track.Repaired()
	h.g.log.Info(msg, zap.Int64("lease", int64(h.lease)))
}

// keepAlive starts keeping h.lease alive.
func (h *holder) keepAlive() {
	kctx, cancel := context.WithCancel(h.ctx)
	ch, err := h.g.client.KeepAlive(kctx, h.lease)
	if err != nil {
		// The client is closed (or ctx is done): nothing will answer.
		cancel()
		h.g.log.Warn("keep-alive failed", zap.Error(opErr("keepalive", h.g.key, err)))
		closed := make(chan *clientv3.LeaseKeepAliveResponse)
		close(closed)
		ch = closed
		cancel = func() {}
	}
	h.kaCh, h.kaCancel = ch, cancel
}

func (h *holder) stopKeepAlive() {
	if h.kaCancel != nil {
		h.kaCancel()
		h.kaCancel = nil
	}
}

// watch starts watching the key from rev + 1. The watch does not require
// a leader: during a quorum loss it waits, rather than ending.
func (h *holder) watch(rev int64) {
	wctx, cancel := context.WithCancel(h.ctx)
	h.wCh, h.wCancel = h.g.client.Watch(wctx, h.g.key, clientv3.WithRev(rev+1)), cancel
}

func (h *holder) stopWatch() {
	if h.wCancel != nil {
		h.wCancel()
		h.wCancel = nil
	}
}

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
