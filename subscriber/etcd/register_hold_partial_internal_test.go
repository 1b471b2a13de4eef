package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// TestHoldEndsWithALeaseGone: the hub holds every lease while the member
// is down; as it comes back, one lease is revoked. The stream answers for
// the others (and that lease's keep-alive answers that it is gone): the
// hold ends, the others keep their leases, and the one whose lease went
// registers again on a new one, without any waiting for a TTL's end.
func TestHoldEndsWithALeaseGone(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	core, logs := observer.New(zap.WarnLevel)
	var regs []*registration
	for i := range 3 {
		g, err := Register(ctx, cli, subscriber.Key{Service: "orders"},
			subscriber.Instance{IP: fmt.Sprintf("10.0.5.%d", i+1), Port: 80, Weight: 1, Enabled: true, Healthy: true},
			WithTTL(15*time.Second), WithLogger(zap.New(core)))
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
				t.Fatalf("%s: not within a minute", what)
			case <-tick.C:
			}
		}
	}
	c.Stop()
	until("the hub holds the leases", hub.holding)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	until("the hold ends", func() bool { return !hub.holding() })
	until("registered again on a new lease", func() bool {
		st := regs[0].Status()
		if st.State != subscriber.RegistrationRegistered || st.Registrations != 2 || regs[0].currentLease() == leases[0] {
			return false
		}
		resp, err := cli.Get(ctx, regs[0].key)
		return err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == regs[0].currentLease()
	})
	for i, g := range regs[1:] {
		if st := g.Status(); g.currentLease() != leases[i+1] || st.Registrations != 1 || st.State != subscriber.RegistrationRegistered {
			t.Fatalf("Registration %d: lease %x (was %x), %+v; want the same lease, registered once", i+1, g.currentLease(), leases[i+1], st)
		}
	}
	if n := logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end; want none", n)
	}
}
