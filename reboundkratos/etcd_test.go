package reboundkratos_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2/registry"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

type etcdEnv struct {
	c *etcdtest.Cluster
	m *subscriber.Manager // the last discovery's
}

func newEtcdEnv(t *testing.T) *etcdEnv { return newEtcdCluster(t, 1) }

func newEtcdCluster(t *testing.T, size int) *etcdEnv {
	t.Helper()
	c, err := etcdtest.NewCluster(size, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &etcdEnv{c: c}
}

func (e *etcdEnv) client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = e.c.Endpoints()
	}
	client, err := clientv3.New(etcd.ClientConfig(nil, endpoints...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// registrar is a provider process's Registrar: its own etcd client,
// etcd.Register in the contrib etcd layout.
func (e *etcdEnv) registrar(t testing.TB) *reboundkratos.Registrar {
	t.Helper()
	client := e.client(t)
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd,
		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
			return etcd.Register(ctx, client, key, inst, etcd.WithLayout(reboundkratos.EtcdLayout("")), etcd.WithTTL(5*time.Second), etcd.WithLogger(zaptest.NewLogger(t)))
		}, reboundkratos.WithDrainDelay(testDrain), reboundkratos.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// discovery is a consumer process's Discovery: its own etcd client, the
// adapter in the contrib etcd layout, a Manager.
func (e *etcdEnv) discovery(t testing.TB, endpoints ...string) *reboundkratos.Discovery {
	t.Helper()
	client := e.client(t, endpoints...)
	reg, err := etcd.New(client, etcd.WithLayout(reboundkratos.EtcdLayout("")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	m, err := subscriber.New(reg, subscriber.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.m = m
	d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatEtcd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *etcdEnv) restart(t *testing.T, down time.Duration) {
	t.Helper()
	e.c.Stop()
	time.Sleep(down)
	if err := e.c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKratosEtcd: kratos apps registered through the Registrar in the
// contrib etcd layout, and a kratos gRPC client dialling
// discovery:///helloworld through the Discovery:
//   - the client starts while etcd is down: the dial does not fail, RPCs
//     wait and reach the providers once etcd is back;
//   - an etcd restart under load costs no RPC, and a provider registered
//     after it is reached;
//   - App.Stop of one of 3 providers under load (200 RPC/s) costs no RPC.
func TestKratosEtcd(t *testing.T) {
	env := newEtcdEnv(t)
	p1 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	p2 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})

	// Registry down at client start.
	env.c.Stop()
	d := env.discovery(t)
	cc := dialKratos(t, d, "helloworld") // fails the test on a dial failure
	time.Sleep(time.Second)
	if err := env.c.Start(); err != nil {
		t.Fatal(err)
	}
	waitProviders(t, cc, p1, p2)

	// Registry restart under load, then a new provider.
	load := startLoad(t, cc)
	env.restart(t, 2*time.Second)
	p3 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	waitProviders(t, cc, p1, p2, p3)
	load.stop()
	t.Logf("etcd restart: %d RPCs ok, %d failed", load.ok.Load(), load.failed.Load())
	if n := load.failed.Load(); n > 0 {
		t.Fatalf("%d RPCs failed through the etcd restart (first: %v)", n, load.firstErr.Load())
	}

	// App.Stop of one of three under load.
	load = startLoad(t, cc)
	subscribertest.Eventually(t, testTimeout, "load on p1", func() bool { return load.count(p1.addr) > 10 })
	p1.stop(t)
	before := load.ok.Load()
	subscribertest.Eventually(t, testTimeout, "400 RPCs after the stop", func() bool { return load.ok.Load() > before+400 })
	load.stop()
	t.Logf("App.Stop: %d RPCs ok, %d failed; discovery %+v", load.ok.Load(), load.failed.Load(), reboundkratos.ViewStats(d))
	if n := load.failed.Load(); n > 0 {
		t.Fatalf("%d RPCs failed through App.Stop of one of 3 providers (first: %v)", n, load.firstErr.Load())
	}
}

// TestKratosEtcdMemberCrashAndCompaction: the consumer's only etcd member
// crashes; meanwhile an instance is deregistered, p2 registers and the
// cluster compacts at its current revision, so the consumer's watch
// cannot resume where it was; the member comes back: the Discovery's view
// is the cluster's (the deregistered instance gone, p2 there), the client
// reaches p2, no RPC fails. (The contrib etcd registry's watch channel
// closes on compaction and its Next turns into a loop of Gets.) The
// deregistered instance has no server behind it: a provider that stops
// while its consumers cannot hear the registry would answer NOT_SERVING
// to them whatever the registry does.
func TestKratosEtcdMemberCrashAndCompaction(t *testing.T) {
	env := newEtcdCluster(t, 3)
	p0 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	p1 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ghostReg := env.registrar(t)
	ghost := &registry.ServiceInstance{ID: "ghost", Name: "helloworld", Endpoints: []string{"grpc://" + closedAddr(t)}}
	if err := ghostReg.Register(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	d := env.discovery(t, env.c.Endpoint(0))
	cc := dialKratos(t, d, "helloworld")
	waitProviders(t, cc, p0, p1)
	view := func(want ...string) func() bool {
		return func() bool {
			l, err := d.GetService(ctx, "helloworld")
			if err != nil || len(l) != len(want) {
				return false
			}
			ids := map[string]bool{}
			for _, si := range l {
				ids[si.ID] = true
			}
			for _, id := range want {
				if !ids[id] {
					return false
				}
			}
			return true
		}
	}
	subscribertest.Eventually(t, testTimeout, "the view p0, p1, ghost", view(p0.app.ID(), p1.app.ID(), "ghost"))

	load := startLoad(t, cc)
	env.c.StopMember(0)
	if err := ghostReg.Deregister(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	p2 := startProvider(t, "helloworld", trackRegistrar{env.registrar(t)})
	admin := env.client(t, env.c.Endpoint(1), env.c.Endpoint(2))
	resp, err := admin.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := env.c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	waitProviders(t, cc, p0, p1, p2)
	subscribertest.Eventually(t, testTimeout, "the view p0, p1, p2", view(p0.app.ID(), p1.app.ID(), p2.app.ID()))
	n := load.ok.Load()
	subscribertest.Eventually(t, testTimeout, "200 RPCs after p2 was reached", func() bool { return load.ok.Load() > n+200 })
	load.stop()
	t.Logf("member crash + compaction: %d RPCs ok, %d failed", load.ok.Load(), load.failed.Load())
	if n := load.failed.Load(); n > 0 {
		t.Fatalf("%d RPCs failed (first: %v)", n, load.firstErr.Load())
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}
