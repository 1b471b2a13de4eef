package etcd_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
