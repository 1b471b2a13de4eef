package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Two Registrations of one instance (two processes, two clients) through
// a cluster that loses its data: both register again on new leases, one
// holds the key and the other yields; when the holder shuts down, the
// other puts the key back.
func TestTwoRegistrationsThroughWipe(t *testing.T) {
	c := newCluster(t, 1)
	cliA, cliB, admin := newClient(t, c), newClient(t, c), newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	opts := []etcdreg.Option{etcdreg.WithTTL(2 * time.Second), etcdreg.WithAttemptTimeout(time.Second),
		etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond})}
	a, err := etcdreg.RegisterConcrete(ctx, cliA, orders, inst("10.0.0.1", 80), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := etcdreg.RegisterConcrete(ctx, cliB, orders, inst("10.0.0.1", 80), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := c.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	keyLease := func() clientv3.LeaseID {
		resp, err := admin.Get(ctx, a.InstanceKey())
		if err != nil || len(resp.Kvs) == 0 {
			return 0
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	eventually(t, "both register again and one of them holds the key", func() bool {
		l := keyLease()
		return a.Status().Registrations == 2 && b.Status().Registrations == 2 && l != 0 && (l == a.Lease() || l == b.Lease())
	})
	holder, other := a, b
	if keyLease() == b.Lease() {
		holder, other = b, a
	}
	if err := holder.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other puts the key back on its lease", func() bool { return keyLease() == other.Lease() })
}
