package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// stop ends the loop (its request in flight is cancelled), bounded by
// ctx, and waits for the hub's goroutines that its end stopped.
func (g *registration) stop(ctx context.Context) error {
	g.cancel()
	g.loop.Stop()
	select {
	case <-g.loop.Done():
		g.leftOnce.Do(g.left)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the registration at once, without a request: the key stays
// until its lease expires (at most the TTL). It implements io.Closer: it
// is idempotent, waits for the repair step in flight and returns nil.
func (g *registration) Close() error {
	if g.track.InObserver() { // Close would wait for the step calling the observer
		go func() { _ = g.Close() }()
		return fmt.Errorf("etcd: Registration.Close from its observer: stopping in the background: %w", rebound.ErrCalledFromCallback)
	}
	_ = g.stop(context.Background())
	g.track.Set(subscriber.RegistrationStopped, nil)
	return nil
}

// Shutdown stops the registration and revokes its lease, which deletes
// the key unless another Registration took it over. A failed revocation
// is retried (WithPolicy) until ctx is done; the error is then a
// *rebound.RetryError, and the key goes when the lease expires. Shutdown
// may follow Close and is idempotent: later calls wait for the first
// one's result, bounded by their own ctx.
func (g *registration) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return argErr("Registration.Shutdown", "ctx", "must not be nil")
	}
	if g.track.InObserver() { // Shutdown would wait for the step calling the observer
		go func() { _ = g.Shutdown(ctx) }()
		return fmt.Errorf("etcd: Registration.Shutdown from its observer: stopping in the background: %w", rebound.ErrCalledFromCallback)
	}
	if err := g.stop(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	first := !g.revoking
	g.revoking = true
	g.mu.Unlock()
	if !first {
		select {
		case <-g.revoked:
			return g.revokeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The engine calls the observers in the revocation's requests:
	// Close, Shutdown and Update called there do not wait for them.
	in := g.track.Enter()
	defer g.track.Leave(in)
	g.track.Set(subscriber.RegistrationDeregistering, nil)
	lease := g.currentLease()
	g.revokeErr = g.retrier.Do(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, g.opts.timeout)
		defer cancel()
		start := time.Now()
		_, err := g.client.Revoke(ctx, lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil // gone already: nothing holds the key any more
		}
		err = permanentIfClosed(classify("revoke", g.key, err, g.closed()))
		g.track.Attempt(regstate.OpDeregister, start, err)
		return err
	})
	g.track.Set(subscriber.RegistrationStopped, g.revokeErr)
	close(g.revoked)
	return g.revokeErr
}

// update is one Update request to the loop.
type update struct {
	ctx   context.Context
	inst  subscriber.Instance
	value string
	done  chan error // buffered (1)
}

// checkWeight rejects a weight no balancer can use (and JSON cannot hold).
func checkWeight(fn string, w float64) error {
	if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		return argErr(fn, "inst.Weight", fmt.Sprintf("must be a finite number >= 0; got %v", w))
	}
	return nil
}

// Update puts inst's new value (weight, metadata, enabled, healthy) on
// the current lease and returns once etcd holds it, or the error (the
// previous value stays). While another lease holds the key, it only
// records the value. inst must keep the key (its ID, or IP and port) and
// be valid for Register, or it is a *rebound.ArgumentError. After Shutdown
// or Close the error matches rebound.ErrClosed.
func (g *registration) Update(ctx context.Context, inst subscriber.Instance) error {
	const fn = "Registration.Update"
	if ctx == nil {
		return argErr(fn, "ctx", "must not be nil")
	}
	if err := checkWeight(fn, inst.Weight); err != nil {
		return err
	}
	if err := regstate.CheckRegistrable("etcd."+fn, inst); err != nil {
		return err
	}
	inst.Ephemeral = true
	id, value, err := g.layout.Encode(inst)
	if err != nil {
		return err
	}
	prefix, _ := g.layout.ServicePrefix(g.track.Key())
	if prefix+id != g.key {
		return argErr(fn, "inst", fmt.Sprintf("must keep the instance's key %q (another key is another instance: Register it); got %q", g.key, prefix+id))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	u := update{ctx: ctx, inst: inst, value: string(value), done: make(chan error, 1)}
	stopped := opErr("update", g.key, regstate.ErrStopped)
	if g.track.InObserver() {
		// From the Registration's observer: on the goroutine of the step
		// calling it, which the loop waits for (a posted Update would
		// never run), or of Close or Shutdown once the loop ended.
		select {
		case <-g.loop.Done():
			return stopped
		default:
			return g.h.update(u)
		}
	}
	if !g.loop.Post(func() bool { u.done <- g.h.update(u); return true }) {
		return stopped
	}
	select {
	case err := <-u.done:
		return err
	case <-g.loop.Done():
		select {
		case err := <-u.done:
			return err
		default:
			return stopped // the loop ended before it took the Update
		}
	case <-ctx.Done():
		// The loop's request is bounded by ctx too: it ends soon.
		return ctx.Err()
	}
}

// update puts u's value on the current lease (in a step of the loop) if
// the lease holds the key or nothing does; it only records the value
// while another lease holds the key.
func (h *holder) update(u update) error {
	g := h.g
	ctx, cancel := context.WithTimeout(u.ctx, g.opts.timeout)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	start := time.Now()
	put := clientv3.OpPut(g.key, u.value, clientv3.WithLease(h.lease))
	held := func(l clientv3.LeaseID) clientv3.Cmp {
		return clientv3.Compare(clientv3.LeaseValue(g.key), "=", l)
	}
	// A missing key and a key without a lease compare equal to lease 0.
	resp, err := g.client.Txn(ctx).If(held(h.lease)).Then(put).
		Else(clientv3.OpTxn([]clientv3.Cmp{held(0)}, []clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(g.key)})).
		Commit()
	if err != nil {
		err = classify("put", g.key, err, g.closed())
	}
	g.track.Attempt(regstate.OpUpdate, start, err)
	if err != nil {
		return err
	}
	if inner := resp.Responses[0].GetResponseTxn(); !resp.Succeeded && inner != nil && !inner.Succeeded {
		h.yielded = true
		g.log.Info("another lease holds the key; the new value is put when it comes back", zap.Int64("lease", int64(h.lease)))
	} else {
		h.yielded = false
	}
	g.value = u.value
	g.track.SetInstance(u.inst)
	return nil
}

// grantAndPut grants a lease and puts the key on it, bounded by the
// attempt timeout; it returns the lease and the revision to watch from.
// With take the put overwrites the key (Register takes over an instance
// key); without it, a key another lease holds is left to it (yielded).
func (g *registration) grantAndPut(parent context.Context, take bool) (lease clientv3.LeaseID, rev int64, yielded bool, err error) {
	ctx, cancel := context.WithTimeout(parent, g.opts.timeout)
	defer cancel()
	lr, err := g.client.Grant(ctx, g.ttl)
	if err != nil {
		return 0, 0, false, classify("grant", g.key, err, g.closed())
	}
	put := clientv3.OpPut(g.key, g.value, clientv3.WithLease(lr.ID))
	txn := g.client.Txn(ctx)
	if !take {
		// A missing key and a key without a lease compare equal to lease 0.
		txn = txn.If(clientv3.Compare(clientv3.LeaseValue(g.key), "=", 0))
	}
	resp, err := txn.Then(put).Commit()
	if err != nil {
		// The put may have been applied all the same: a failed answer,
		// or ctx ended (Shutdown or Close cancelled the repair) after
		// the request left. Nobody else knows the lease: revoked here,
		// it takes such a key with it.
		g.revokeBestEffort(parent, lr.ID)
		return 0, 0, false, classify("put", g.key, err, g.closed())
	}
	return lr.ID, resp.Header.Revision, !resp.Succeeded, nil
}

// revokeBestEffort revokes a lease, bounded by the attempt timeout, and
// by revokeGrace after ctx's end: the lease of a put that ctx's end
// interrupted may hold the key, and the caller returns soon after ctx's
// end. A lease it cannot revoke expires with its TTL.
func (g *registration) revokeBestEffort(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(revokeGrace, cancel) })
	defer stop()
	_, _ = g.client.Revoke(rctx, id)
}

// revokeGrace is how long revokeBestEffort goes on after its ctx ended.
const revokeGrace = time.Second
