package etcd_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestBreakRegistrationsChurnLeaveNothing registers many instances on two
// clients under two service prefixes (one instance on both clients), then
// races Update, Shutdown and Close of every Registration, each called
// twice at once. Correct behaviour: every call returns; a key whose
// Registrations were all shut down is gone when Shutdown returns; a key
// only closed goes with its lease (nothing keeps it alive); and once the
// last Registration of a client has stopped, the shared keep-alive stream,
// watches and connection watcher are gone (the goroutines are back to
// what the clients had before).
func TestBreakRegistrationsChurnLeaveNothing(t *testing.T) {
	c := newCluster(t, 1)
	clis := []*clientv3.Client{newClient(t, c), newClient(t, c)}
	admin := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, cli := range clis {
		if _, err := cli.Get(ctx, "warm-up"); err != nil { // the connection's goroutines
			t.Fatal(err)
		}
	}
	if _, err := admin.Get(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	payments := subscriber.Key{Service: "payments"}
	type reg struct {
		g        *etcdreg.Registration
		shutdown bool
		inst     subscriber.Instance
	}
	var regs []reg
	for ci, cli := range clis {
		for i := range 20 {
			k := orders
			if i%2 == 1 {
				k = payments
			}
			in := inst(fmt.Sprintf("10.0.%d.%d", ci+1, i+1), 80)
			g, err := etcdreg.RegisterConcrete(ctx, cli, k, in, fastRegister...)
			if err != nil {
				t.Fatal(err)
			}
			regs = append(regs, reg{g: g, shutdown: i%3 != 0, inst: in})
		}
		// One instance registered on both clients.
		g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.9.9", 80), fastRegister...)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg{g: g, shutdown: true, inst: inst("10.0.9.9", 80)})
	}
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Add(4)
		go func() {
			defer wg.Done()
			in := r.inst
			in.Weight = float64(i + 2)
			_ = r.g.Update(ctx, in) // may lose the race with the stop: either is fine
		}()
		for range 2 {
			go func() {
				defer wg.Done()
				if r.shutdown {
					if err := r.g.Shutdown(ctx); err != nil {
						t.Errorf("Shutdown %s: %v", r.g.InstanceKey(), err)
					}
				} else if err := r.g.Close(); err != nil {
					t.Errorf("Close %s: %v", r.g.InstanceKey(), err)
				}
			}()
		}
		go func() {
			defer wg.Done()
			_ = r.g.Close() // a Close racing the Shutdown or Close
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, r := range regs {
		if !r.shutdown {
			continue
		}
		resp, err := admin.Get(ctx, r.g.InstanceKey())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 0 {
			t.Errorf("key %s still present after Shutdown returned (lease %x)", r.g.InstanceKey(), resp.Kvs[0].Lease)
		}
	}
	eventually(t, "every key gone with its lease", func() bool {
		resp, err := admin.Get(ctx, etcdreg.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	var now int
	eventually(t, "the shared goroutines gone with the last Registration", func() bool {
		now = runtime.NumGoroutine()
		return now <= before
	})
	if t.Failed() {
		buf := make([]byte, 1<<20)
		t.Logf("%d goroutines, %d before; %s", now, before, buf[:runtime.Stack(buf, true)])
	}
}
