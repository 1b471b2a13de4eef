package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// TestRepairMadeNeedlessByAnotherLeaseEnds: the key is deleted, the
// repair's put fails (a timeout) and waits for its backoff; meanwhile
// another lease puts the key (another registration of the instance).
// The watch shows it: the repair has nothing left to do, and the
// Registration is registered again (it yields the key), not left
// repairing until it is closed. When that lease goes, the key comes back
// on the Registration's own lease.
func TestRepairMadeNeedlessByAnotherLeaseEnds(t *testing.T) {
	_, cli := newMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A backoff longer than the test's waits: only the watch can end
	// the repair in time.
	reg, err := Register(ctx, cli, subscriber.Key{Service: "orders"},
		subscriber.Instance{IP: "10.0.4.1", Port: 80, Weight: 1, Enabled: true, Healthy: true},
		WithTTL(90*time.Second), WithPolicy(rebound.Policy{Initial: 25 * time.Second, Max: 25 * time.Second, Jitter: rebound.NoJitter}))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	g := reg.(*registration)
	until := func(what string, cond func() bool) {
		t.Helper()
		waitUntil(t, ctx, what, cond, func() any { return g.Status() })
	}
	step := func(f func()) {
		t.Helper()
		if !g.loop.Do(func() bool { f(); return true }) {
			t.Fatal("the Registration's loop ended")
		}
	}
	timeout := g.opts.timeout
	step(func() { g.opts.timeout = time.Nanosecond }) // the repair's requests time out
	if _, err := cli.Delete(ctx, g.key); err != nil {
		t.Fatal(err)
	}
	until("the repair fails", func() bool {
		st := g.Status()
		return st.State == subscriber.RegistrationRepairing && st.LastErr != nil
	})
	step(func() { g.opts.timeout = timeout })
	other, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, g.key, g.value, clientv3.WithLease(other.ID)); err != nil {
		t.Fatal(err)
	}
	until("registered (the other lease holds the key)", func() bool {
		st := g.Status()
		return st.State == subscriber.RegistrationRegistered && st.Attempts == 0
	})
	if _, err := cli.Revoke(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	until("the key back on the Registration's lease", func() bool {
		resp, err := cli.Get(ctx, g.key)
		return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == g.currentLease()
	})
}
