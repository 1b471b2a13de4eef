package etcd_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Registrations of one client run no goroutine each: 50 of them add only
// the shared ones (connection watcher, keep-alive stream, one watch per
// service prefix, the scheduler, and clientv3's and the in-process
// server's for the stream and the watch: 15 here, against more than 100
// with a goroutine, a keep-alive channel and a watch per registration),
// and each keeps its key alive past three TTLs.
func TestRegistrationsRunNoGoroutineEach(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, "warm-up"); err != nil { // the connection's goroutines
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const n = 50
	regs := make([]*etcdreg.Registration, n)
	for i := range regs {
		g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst(fmt.Sprintf("10.0.1.%d", i+1), 80), etcdreg.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		regs[i] = g
	}
	var added int
	defer func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("%d added; %s", added, buf[:runtime.Stack(buf, true)])
		}
	}()
	eventually(t, "no goroutine per registration", func() bool {
		added = runtime.NumGoroutine() - before
		return added <= n/2
	})
	t.Logf("%d registrations added %d goroutines", n, added)
	// A lease not kept alive expires within its TTL (etcd's clock, not
	// ours): past three TTLs every key is still on the lease it was put on.
	ttls := time.NewTimer(3 * time.Second)
	defer ttls.Stop()
	select {
	case <-ttls.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	for _, g := range regs {
		resp, err := cli.Get(ctx, g.InstanceKey())
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != g.Lease() {
			t.Fatalf("key %s after 3 TTLs: %v, %v; want it on lease %x", g.InstanceKey(), resp, err, g.Lease())
		}
		if st := g.Status(); st.State != subscriber.RegistrationRegistered || st.Registrations != 1 {
			t.Fatalf("status %+v; want registered on its first lease", st)
		}
	}
}

// While the client's connection is down, a Registration whose repair
// failed waits for the connection, not for a timer: with the member
// stopped, three Registrations (TTL 2 s, retries every 50-300 ms, 200 ms
// attempts) make no attempt in a 3 s window once each has failed (with a
// timer each would make about six), and they are registered again once
// the member is back.
func TestRegistrationsWaitForTheConnectionWhileItIsDown(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	var mu sync.Mutex
	failed := map[string]int{}
	var regs []*etcdreg.Registration
	for i := range 3 {
		ip := fmt.Sprintf("10.0.2.%d", i+1)
		hooks := registrationHooks{Attempted: func(a regAttempt) {
			if a.Err != nil {
				mu.Lock()
				failed[ip]++
				mu.Unlock()
			}
		}}
		g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst(ip, 80), etcdreg.WithTTL(2*time.Second),
			etcdreg.WithAttemptTimeout(200*time.Millisecond),
			etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond}, rebound.WithObserver(hooks)))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		regs = append(regs, g)
	}
	total := func() (n int, all bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range failed {
			n += f
		}
		return n, len(failed) == len(regs)
	}
	c.Stop()
	eventually(t, "every Registration fails a repair", func() bool { _, all := total(); return all })
	// Let a failure that came before the connection was seen down retry
	// once, then count.
	settle := time.NewTimer(time.Second)
	<-settle.C
	before, _ := total()
	window := time.NewTimer(3 * time.Second)
	<-window.C
	if after, _ := total(); after-before > 0 {
		t.Fatalf("%d failed attempts in 3 s with the connection down; want none (each waits for the connection)", after-before)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for _, g := range regs {
		eventually(t, "registered again after the member is back", func() bool {
			resp, err := cli.Get(ctx, g.InstanceKey())
			return err == nil && len(resp.Kvs) == 1 && g.Status().State == subscriber.RegistrationRegistered
		})
	}
}
