package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// A Registration that yielded the key to another (a restarted process on
// the same ip:port, its own client) and then loses its lease (revoked
// here; expired while its process was cut off from the cluster) registers
// again on a new lease but leaves the key to the other: it must not take
// it back, and its Shutdown must not delete it.
func TestLeaseReplacedWhileYieldedLeavesTheOthersKey(t *testing.T) {
	c := newCluster(t, 1)
	cliA, cliB, admin := newClient(t, c), newClient(t, c), newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	opts := []etcdreg.Option{etcdreg.WithTTL(3 * time.Second),
		etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond})}
	in := inst("10.0.0.1", 80)
	in.Weight = 1
	a, err := etcdreg.RegisterConcrete(ctx, cliA, orders, in, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	in.Weight = 2
	b, err := etcdreg.RegisterConcrete(ctx, cliB, orders, in, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	log := watchKey(t, admin, b.InstanceKey())
	holder := func() string {
		resp, err := admin.Get(ctx, b.InstanceKey())
		if err != nil || len(resp.Kvs) == 0 {
			return fmt.Sprint("none ", err)
		}
		return fmt.Sprintf("lease %x", resp.Kvs[0].Lease)
	}
	want := fmt.Sprintf("lease %x", b.Lease())
	if got := holder(); got != want {
		t.Fatalf("after B registered the key holds %s, want B's %s", got, want)
	}
	if _, err := admin.Revoke(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A registers again on a new lease", func() bool { return a.Status().Registrations == 2 })
	if got := holder(); got != want {
		t.Errorf("after A's lease was replaced the key holds %s, want B's %s (A took the key back)", got, want)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := holder(); got != want {
		t.Errorf("after A's Shutdown the key holds %s, want B's %s", got, want)
	}
	if _, deletes := log.missing(); deletes != 0 {
		t.Errorf("the key was deleted %d times while B held it: %v", deletes, log.snapshot())
	}
}
