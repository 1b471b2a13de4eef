package etcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"

	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakShutdownDuringRepairLeavesNoLease: Shutdown cancels a repair
// that granted a new lease and sent the put of its key (held by the
// member, not answered yet). The repair then revoked that lease under
// its cancelled context: the request was never sent, and the lease
// lived on for its TTL, holding the key if etcd applied the put after
// all. Correct: once Shutdown returned nil, no lease of the
// Registration is left, so no key can outlive it.
func TestBreakShutdownDuringRepairLeavesNoLease(t *testing.T) {
	var armed, granted atomic.Bool
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	c := newCluster(t, 1, etcdtest.WithRequestHook(func(r etcdtest.Request) {
		if !armed.Load() {
			return
		}
		switch {
		case r.Name == etcdtest.RequestLeaseGrant:
			granted.Store(true) // the repair's new lease
		case r.Name == etcdtest.RequestTxn && granted.Load() && armed.CompareAndSwap(true, false):
			arrived <- struct{}{} // the put of the key on it: held
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}
	}))
	t.Cleanup(free)
	cli := newClient(t, c)
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	g := register(t, func() (*etcdreg.Registration, error) {
		return etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80), fastRegisterWith()...)
	})
	armed.Store(true)
	// Revoking the lease deletes the key: the Registration grants a new
	// lease and puts the key on it.
	if _, err := admin.Revoke(ctx, g.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the repair did not put its key on a new lease")
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	leases, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 0 {
		t.Fatalf("after Shutdown, %d lease(s) left (%v): the interrupted put's lease holds the key until its TTL", len(leases.Leases), leases.Leases)
	}
	free()
}
