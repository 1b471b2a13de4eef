package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakRegistrationsThroughLeaderChange keeps 20 Registrations of a
// client whose first endpoint is the leader while the leader stops and
// then comes back, past several TTLs each time. Correct behaviour: the
// shared keep-alive stream and watch move to another member; every key
// stays registered (present, Registered) and none is left after Shutdown.
func TestBreakRegistrationsThroughLeaderChange(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.Leader()
	other := (leader + 1) % 3
	cli := newClient(t, c, c.Endpoint(leader), c.Endpoint(other))
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	const n = 20
	regs := make([]*etcdreg.Registration, n)
	for i := range regs {
		g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst(fmt.Sprintf("10.2.0.%d", i+1), 80), fastRegister...)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		regs[i] = g
	}
	allThere := func(what string) {
		t.Helper()
		eventually(t, what, func() bool {
			for _, g := range regs {
				resp, err := admin.Get(ctx, g.InstanceKey())
				if err != nil || len(resp.Kvs) != 1 || g.Status().State != subscriber.RegistrationRegistered {
					return false
				}
			}
			return true
		})
	}
	pause := func() { // past three TTLs (2 s): leases not kept alive expire
		select {
		case <-time.After(7 * time.Second):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	c.StopMember(leader)
	pause()
	allThere("every key registered after the leader stopped")
	if err := c.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c)
	pause()
	allThere("every key registered after the member came back")
	for _, g := range regs {
		t.Logf("%s: %d registrations", g.InstanceKey(), g.Status().Registrations)
		break
	}
	for _, g := range regs {
		if err := g.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown %s: %v", g.InstanceKey(), err)
		}
		resp, err := admin.Get(ctx, g.InstanceKey())
		if err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("key %s after Shutdown: %v, %v", g.InstanceKey(), resp, err)
		}
	}
}
