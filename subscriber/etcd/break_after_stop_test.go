package etcd_test

import (
	"context"
	"testing"

	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakUpdateAfterStopPutsNothing calls Update on Registrations that
// were shut down or closed, and on one whose key someone else deleted
// just before Shutdown. Correct behaviour: Update returns an error and
// puts nothing: no key comes back after Shutdown returned.
func TestBreakUpdateAfterStopPutsNothing(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	absent := func(what, key string) {
		t.Helper()
		resp, err := admin.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 0 {
			t.Errorf("%s: key %s present (lease %x)", what, key, resp.Kvs[0].Lease)
		}
	}

	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80), fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	up := inst("10.0.0.1", 80)
	up.Weight = 7
	if err := g.Update(ctx, up); err == nil {
		t.Error("Update after Shutdown: nil error")
	}
	absent("Update after Shutdown", g.InstanceKey())

	g2, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.2", 80), fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, g2.InstanceKey()); err != nil {
		t.Fatal(err)
	}
	up2 := inst("10.0.0.2", 80)
	up2.Weight = 7
	if err := g2.Update(ctx, up2); err == nil {
		t.Error("Update after Close: nil error")
	}
	absent("Update after Close", g2.InstanceKey())

	// The key deleted behind the Registration's back, then Shutdown at
	// once: the repair the deletion starts must not outlive Shutdown.
	g3, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.3", 80), fastRegister...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, g3.InstanceKey()); err != nil {
		t.Fatal(err)
	}
	if err := g3.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	absent("delete then Shutdown", g3.InstanceKey())
}
