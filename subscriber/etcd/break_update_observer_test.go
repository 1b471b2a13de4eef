package etcd_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakUpdateFromObserver calls Update from the Registration's own
// observer (a state change to repairing, after someone deleted its key).
// Correct behaviour: Update returns without waiting for its ctx (either
// done, or an error that is not the ctx's), and the Registration goes on:
// its key comes back and Shutdown returns.
func TestBreakUpdateFromObserver(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	admin := newClient(t, c)
	var reg atomic.Pointer[etcdreg.Registration]
	var once sync.Once
	returned := make(chan error, 1)
	obs := rebound.WithObserver(registrationHooks{StateChanged: func(e regStateChange) {
		g := reg.Load()
		if e.To != subscriber.RegistrationRepairing || g == nil {
			return
		}
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout/2)
			defer cancel()
			up := inst("10.0.0.1", 80)
			up.Weight = 7
			returned <- g.Update(ctx, up)
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80), fastRegisterWith(obs)...)
	if err != nil {
		t.Fatal(err)
	}
	reg.Store(g)
	defer g.Close()
	if _, err := admin.Delete(ctx, g.InstanceKey()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-returned:
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Update from the observer waited for its ctx: %v", err)
		}
		t.Logf("Update from the observer: %v", err)
	case <-ctx.Done():
		t.Fatal("Update from the observer never returned")
	}
	eventually(t, "the key back", func() bool {
		resp, err := admin.Get(ctx, g.InstanceKey())
		return err == nil && len(resp.Kvs) == 1
	})
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
