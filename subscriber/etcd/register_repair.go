package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// apply reads the watch's events on the key and reports whether the key
// must be put back: it was deleted, or put without a lease. A put on
// another lease is left alone (that lease's holder keeps it; when it lets
// it go, the delete brings it back here). Events at or below the loop's
// last put are older than it: seen is false when all are.
func (h *holder) apply(events []*clientv3.Event) (need, seen bool) {
	for _, ev := range events {
		if ev.Kv.ModRevision <= h.rev {
			continue
		}
		seen = true
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
	return need, seen
}

// Attempt makes one repair attempt, recording its request (regstate.Work).
func (h *holder) Attempt() error {
	start := time.Now()
	err := h.repair()
	h.g.track.Attempt(h.op, start, err)
	return err
}

// The rest of regstate.Work: a closed client's error is permanent (the
// run stops with it, see permanentIfClosed), and a run that ends while
// the registration stops is not reported.

func (h *holder) Tracker() *regstate.Tracker { return h.g.track }
func (h *holder) Logger(lvl zapcore.Level) *zap.Logger {
	if !h.g.log.Core().Enabled(lvl) {
		return nil
	}
	return h.g.log
}
func (h *holder) Retrier() *rebound.Retrier { return h.g.retrier }
func (h *holder) Up() bool                  { return h.g.hub.up.Load() }
func (h *holder) Final(error) bool          { return false }
func (h *holder) Stopping() bool            { return h.g.ctx.Err() != nil }
func (h *holder) Pause() bool               { return false }

// repair makes one attempt at the pending work, bounded by the attempt
// timeout, and clears what it did.
func (h *holder) repair() error {
	g := h.g
	ctx, cancel := context.WithTimeout(g.ctx, g.opts.timeout)
	defer cancel()
	h.op = regstate.OpCheck
	if h.pending&probeLease != 0 {
		resp, err := g.client.TimeToLive(ctx, h.lease)
		switch {
		case err == nil && resp.TTL > 0:
			g.log.Info("the lease lives; keeping it alive again", zap.Int64("lease", int64(h.lease)), zap.Int64("ttl", resp.TTL))
			h.keepAlive(true)
			h.pending &^= probeLease
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			return h.replaceLease()
		default:
			return permanentIfClosed(classify("timetolive", g.key, err, g.closed()))
		}
	}
	if h.pending&ensureKey != 0 {
		rev, err := h.ensure(ctx)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return h.replaceLease()
		}
		if err != nil {
			return permanentIfClosed(classify("put", g.key, err, g.closed()))
		}
		h.rev = rev
		h.pending &^= ensureKey
	}
	return nil
}

// replaceLease grants a new lease and puts the key on it: the old lease
// is gone.
func (h *holder) replaceLease() error {
	g := h.g
	h.op = regstate.OpRegister
	g.log.Warn("lease gone (expired, revoked or lost with the cluster's data); registering again",
		zap.Int64("lease", int64(h.lease)))
	lease, rev, yielded, err := g.grantAndPut(g.ctx, false)
	if err != nil {
		return permanentIfClosed(err)
	}
	old := h.lease
	h.setLease(lease)
	g.track.Registered()
	g.log.Info("registered again", zap.Int64("lease", int64(lease)), zap.Int64("previous", int64(old)))
	h.keepAlive(false)
	h.rev = rev
	g.hub.rewatch(g.prefix, rev)
	h.yielded = yielded
	if yielded {
		g.log.Info("another lease holds the key (another registration of this instance); leaving it", zap.Int64("lease", int64(lease)))
	}
	h.pending = 0
	return nil
}

// ensure makes sure the key is registered: it puts the key on the lease
// if it is missing, without a lease, or on the lease with another value;
// it leaves a key that another lease holds. It returns the revision the
// key was read or put at: the watch's events up to it are older.
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
