package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// TestHoldThroughAFlappingMember: the member stops (the hub holds every
// lease), starts and stops again at once, then comes back for good, all
// well within the TTL. Every Registration ends answered on its own lease,
// registered once; the hub neither stays holding nor loses a lease.
func TestHoldThroughAFlappingMember(t *testing.T) {
	c, err := etcdtest.NewCluster(1, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli, err := clientv3.New(ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var regs []*registration
	for i := range 3 {
		g, err := Register(ctx, cli, subscriber.Key{Service: "orders"},
			subscriber.Instance{IP: fmt.Sprintf("10.0.6.%d", i+1), Port: 80, Weight: 1, Enabled: true, Healthy: true},
			WithTTL(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		regs = append(regs, g.(*registration))
	}
	hub, leases := regs[0].hub, make([]clientv3.LeaseID, len(regs))
	for i, g := range regs {
		leases[i] = g.currentLease()
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not within two minutes", what)
			case <-tick.C:
			}
		}
	}
	c.Stop()
	until("the hub holds the leases", hub.holding)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	until("the hold ends", func() bool { return !hub.holding() })
	for _, g := range regs {
		until("an answer after the member is back", func() bool {
			last := make(chan time.Time, 1)
			if !g.loop.Do(func() bool { last <- g.h.kaLast; return true }) {
				t.Fatal("the Registration's loop ended")
			}
			return (<-last).After(back)
		})
	}
	for i, g := range regs {
		st := g.Status()
		if g.currentLease() != leases[i] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i, g.currentLease(), leases[i], st)
		}
		resp, err := cli.Get(ctx, g.key)
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != leases[i] {
			t.Fatalf("Registration %d: key %v (%v); want it on lease %x", i, resp, err, leases[i])
		}
	}
}
