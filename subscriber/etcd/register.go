package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Registration keeps one instance registered: its key is bound to a lease
// that a goroutine keeps alive, and registered again on a new lease
// whenever the lease is lost (it expired while the cluster was
// unreachable, it was revoked, or the cluster lost its data). Create it
// with Register (the zero value is not usable); stop it with Close, which
// deregisters the instance. Its methods are safe for concurrent use.
//
// A Registration does not watch its key: if someone deletes the key but
// not the lease, the instance stays unregistered until the lease is lost.
type Registration struct {
	client *clientv3.Client
	opts   options
	log    *zap.Logger
	key    string // the instance's etcd key
	value  string // its JSON value
	ttl    int64  // seconds

	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends

	mu         sync.Mutex
	lease      clientv3.LeaseID
	registered int // successful registrations, the first included

	closeOnce sync.Once
	closeErr  error
}

// Register registers inst as an instance of key's service (key.Clusters
// must be empty: the instance's cluster is inst.Cluster) and keeps it
// registered until Close. The instance is stored under InstanceKey(prefix,
// key, InstanceID(inst)) as EncodeInstance(inst), with Ephemeral set: it
// lives on a lease of the TTL set by WithTTL (default 10 s), kept alive by
// the client.
//
// Register makes the first registration itself (a lease grant and a put,
// bounded by ctx and WithAttemptTimeout) and returns its error, if any,
// with nothing left running; the error is an *OpError, or an
// *subscriber.ArgumentError for a bad argument. After that, a goroutine
// keeps the lease alive and, whenever the lease is lost, registers again
// with backoff (WithPolicy) until Close. Options: WithPrefix, WithLogger,
// WithAttemptTimeout, WithTTL, WithPolicy.
func Register(ctx context.Context, client *clientv3.Client, key subscriber.Key, inst subscriber.Instance, opts ...Option) (*Registration, error) {
	const fn = "Register"
	if ctx == nil {
		return nil, &subscriber.ArgumentError{Func: fn, Arg: "ctx", Reason: "is nil"}
	}
	if client == nil {
		return nil, &subscriber.ArgumentError{Func: fn, Arg: "client", Reason: "is nil"}
	}
	if len(key.Clusters) > 0 {
		return nil, &subscriber.ArgumentError{Func: fn, Arg: "key.Clusters",
			Reason: "is not empty (an instance's cluster is inst.Cluster)"}
	}
	if inst.IP == "" {
		return nil, &subscriber.ArgumentError{Func: fn, Arg: "inst.IP", Reason: "is empty"}
	}
	o, err := newOptions(fn, opts)
	if err != nil {
		return nil, err
	}
	id := InstanceID(inst)
	k, err := instanceKey(fn, o.prefix, key, id)
	if err != nil {
		var ae *subscriber.ArgumentError
		if errors.As(err, &ae) && ae.Arg == "id" {
			// Name the field the ID came from.
			arg := "inst.ID"
			if inst.ID == "" {
				arg = "inst.IP"
			}
			return nil, &subscriber.ArgumentError{Func: fn, Arg: arg, Reason: fmt.Sprintf("gives the instance ID %q, which is not a valid key segment", id), Err: err}
		}
		return nil, err
	}
	inst.Ephemeral = true
	value, err := EncodeInstance(inst)
	if err != nil {
		return nil, err
	}
	g := &Registration{
		client: client,
		opts:   o,
		log:    o.log.With(zap.String("component", "subscriber/etcd"), zap.String("key", k)),
		key:    k,
		value:  string(value),
		ttl:    int64((o.ttl + time.Second - 1) / time.Second),
		done:   make(chan struct{}),
	}
	lease, err := g.register(ctx)
	if err != nil {
		return nil, err
	}
	g.lease, g.registered = lease, 1
	var lctx context.Context
	lctx, g.cancel = context.WithCancel(context.Background())
	go g.loop(lctx, lease)
	return g, nil
}

// Key returns the instance's etcd key.
func (g *Registration) Key() string { return g.key }

// Lease returns the lease the instance is currently bound to.
func (g *Registration) Lease() clientv3.LeaseID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lease
}

// Registrations counts the successful registrations so far: 1 after
// Register, one more after each re-registration on a new lease.
func (g *Registration) Registrations() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.registered
}

// register makes one registration: grant a lease, put the key on it.
func (g *Registration) register(ctx context.Context) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.timeout)
	defer cancel()
	closed := func() bool { return g.client.Ctx().Err() != nil }
	lr, err := g.client.Grant(ctx, g.ttl)
	if err != nil {
		return 0, classify("grant", g.key, err, closed())
	}
	if _, err := g.client.Put(ctx, g.key, g.value, clientv3.WithLease(lr.ID)); err != nil {
		g.revoke(lr.ID) // do not leave the lease behind
		return 0, classify("put", g.key, err, closed())
	}
	return lr.ID, nil
}

// revoke revokes a lease, best effort, bounded by the attempt timeout.
func (g *Registration) revoke(id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.timeout)
	defer cancel()
	_, err := g.client.Revoke(ctx, id)
	return err
}

// loop keeps the lease alive and registers again when it is lost.
func (g *Registration) loop(ctx context.Context, lease clientv3.LeaseID) {
	defer close(g.done)
	// Losing a lease again soon after registering it (a cluster that
	// keeps losing its data, a client whose keep-alives fail at once)
	// must not turn into a loop of grants: such losses wait for this
	// backoff first. A lease that lived a full TTL resets it.
	pause := g.opts.policy.NewBackOff()
	for {
		start := time.Now()
		g.keepAlive(ctx, lease)
		if ctx.Err() != nil {
			return
		}
		g.log.Warn("lease lost (expired, revoked or gone with the cluster's data); registering again",
			zap.Int64("lease", int64(lease)))
		if time.Since(start) >= time.Duration(g.ttl)*time.Second {
			pause.Reset()
		} else if !sleep(ctx, pause.NextBackOff()) {
			return
		}
		old := lease
		err := rebound.Retry(ctx, g.opts.policy, func(ctx context.Context) error {
			id, err := g.register(ctx)
			if errors.Is(err, subscriber.ErrRegistryClosed) {
				return rebound.Permanent(err)
			}
			lease = id
			return err
		}, rebound.WithNotify(func(e rebound.Event) {
			if e.Kind == rebound.EventRetry {
				g.log.Debug("registration failed", zap.Int("attempt", e.Attempt), zap.Duration("next", e.Delay), zap.Error(e.Err))
			}
		}))
		if err != nil {
			if ctx.Err() == nil {
				// A permanent error (the client was closed, permission
				// denied): nothing more can be done.
				g.log.Error("registration stopped", zap.Error(err))
			}
			return
		}
		g.mu.Lock()
		g.lease = lease
		g.registered++
		g.mu.Unlock()
		// The old lease, if it is still alive (it was only unreachable),
		// no longer holds the key; it expires by itself.
		g.log.Info("registered again", zap.Int64("lease", int64(lease)), zap.Int64("previous", int64(old)))
	}
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// keepAlive keeps lease alive until the client gives up on it (the lease
// expired or is gone) or ctx is done.
func (g *Registration) keepAlive(ctx context.Context, lease clientv3.LeaseID) {
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := g.client.KeepAlive(kctx, lease)
	if err != nil {
		g.log.Warn("keep-alive failed", zap.Error(&OpError{Op: "keepalive", Key: g.key, Err: err}))
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
		}
	}
}

// Close stops keeping the instance registered and deregisters it (revokes
// its lease, which deletes the key), bounded by ctx. If the revocation
// fails (the cluster is unreachable), the key disappears when the lease
// expires, and Close returns the error (an *OpError). Close is idempotent:
// later calls return the first call's result.
func (g *Registration) Close(ctx context.Context) error {
	if ctx == nil {
		return &subscriber.ArgumentError{Func: "Registration.Close", Arg: "ctx", Reason: "is nil"}
	}
	g.closeOnce.Do(func() {
		g.cancel()
		<-g.done
		lease := g.Lease()
		ctx, cancel := context.WithTimeout(ctx, g.opts.timeout)
		defer cancel()
		if _, err := g.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			g.closeErr = classify("revoke", g.key, err, g.client.Ctx().Err() != nil)
		}
	})
	return g.closeErr
}
