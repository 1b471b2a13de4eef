package reboundgrpc_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

type etcdEnv struct {
	c      *etcdtest.Cluster
	client *clientv3.Client
	b      *reboundgrpc.Builder
	regs   map[*backend]subscriber.Registration
}

func newEtcdEnv(t *testing.T) *etcdEnv {
	t.Helper()
	c, err := etcdtest.NewCluster(1, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	client, err := clientv3.New(etcd.ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	reg, err := etcd.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	m, err := subscriber.New(reg, subscriber.WithPolicy(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	b, err := reboundgrpc.NewBuilder(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &etcdEnv{c: c, client: client, b: b, regs: map[*backend]subscriber.Registration{}}
}

func (e *etcdEnv) register(t *testing.T, bs ...*backend) {
	t.Helper()
	for _, b := range bs {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		r, err := etcd.Register(ctx, e.client, subscriber.Key{Service: "orders"}, b.instance(), etcd.WithTTL(5*time.Second))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		e.regs[b] = r
		t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	}
}

func (e *etcdEnv) deregister(t *testing.T, b *backend) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.regs[b].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdChurnAndRestart: the same resolver over the etcd adapter:
// providers reached, churn followed, and a registry restart (the cluster
// stops for 2 s with providers up) costs no RPC.
func TestEtcdChurnAndRestart(t *testing.T) {
	env := newEtcdEnv(t)
	a, b := startBackend(t), startBackend(t)
	env.register(t, a, b)
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, a, b)

	a.stop()
	env.deregister(t, a)
	c := startBackend(t)
	env.register(t, c)
	waitBackends(t, cc, b, c)

	load := startLoad(t, cc)
	env.c.Stop()
	time.Sleep(2 * time.Second)
	if err := env.c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := env.c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	d := startBackend(t)
	env.register(t, d)
	waitBackends(t, cc, b, c, d)
	load.stop()
	t.Logf("etcd restart: %d RPCs ok, %d failed; builder %+v", load.ok.Load(), load.failed.Load(), env.b.Stats())
	if load.failed.Load() > 0 {
		t.Fatalf("%d RPCs failed through the etcd restart", load.failed.Load())
	}
}
