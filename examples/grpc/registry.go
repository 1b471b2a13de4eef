package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdresolver "go.etcd.io/etcd/client/v3/naming/resolver"
	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

const service = "orders"

// registry is one embedded registry with the two consumers' resolvers.
type registry interface {
	// register makes p visible to consumers; deregister removes it as the
	// registry would after a crash.
	register(p *provider) error
	deregister(p *provider)
	// stop and start take the whole registry down and up again, providers
	// and consumers staying up.
	stop()
	start() error
	// rebound is the Builder and target of the rebound consumer; baseline
	// the resolver and target of the baseline consumer.
	rebound() (resolver.Builder, string)
	baseline() (resolver.Builder, string)
	close()
}

// tmpDir is where the registries keep their files.
func tmpDir() (string, error) { return os.MkdirTemp("", "rebound-grpc-example-") }

// ---- Nacos ----

type nacosRegistry struct {
	dir      string
	srv      *nacostest.Server
	consumer naming_client.INamingClient // rebound's
	reg      *nacos.Registry
	base     naming_client.INamingClient // the baseline's
	m        *subscriber.Manager
	b        *reboundgrpc.Builder
	clients  map[*provider]naming_client.INamingClient
}

func nacosClient(srv *nacostest.Server, dir string, whenEmpty bool) (naming_client.INamingClient, error) {
	cache, err := os.MkdirTemp(dir, "cache-")
	if err != nil {
		return nil, err
	}
	return clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			TimeoutMs:            1000,
			NotLoadCacheAtStart:  true,
			UpdateCacheWhenEmpty: whenEmpty,
			CacheDir:             cache,
			LogDir:               filepath.Join(dir, "log"),
			LogLevel:             "error",
			TLSCfg:               constant.TLSConfig{Appointed: true},
		},
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
}

func newNacosRegistry() (_ *nacosRegistry, err error) {
	r := &nacosRegistry{clients: map[*provider]naming_client.INamingClient{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = tmpDir(); err != nil {
		return nil, err
	}
	if r.srv, err = nacostest.NewServer(); err != nil {
		return nil, err
	}
	// rebound's consumer: the SDK configured as subscriber/nacos documents
	// (UpdateCacheWhenEmpty, so that an empty list is delivered at all; the
	// Manager holds empty lists back during reconnect churn).
	if r.consumer, err = nacosClient(r.srv, r.dir, true); err != nil {
		return nil, err
	}
	if r.reg, err = nacos.New(r.consumer); err != nil {
		return nil, err
	}
	if r.m, err = subscriber.New(r.reg); err != nil {
		return nil, err
	}
	if r.b, err = reboundgrpc.NewBuilder(r.m); err != nil {
		return nil, err
	}
	// The baseline's consumer: the SDK's defaults for empty lists.
	if r.base, err = nacosClient(r.srv, r.dir, false); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *nacosRegistry) register(p *provider) error {
	c, err := nacosClient(r.srv, r.dir, false)
	if err != nil {
		return err
	}
	ok, err := c.RegisterInstance(vo.RegisterInstanceParam{
		Ip: "127.0.0.1", Port: p.port, ServiceName: service, Weight: 1,
		Enable: true, Healthy: true, Ephemeral: true,
	})
	if err != nil || !ok {
		c.CloseClient()
		return fmt.Errorf("register %s: %v %w", p.name, ok, err)
	}
	r.clients[p] = c
	return nil
}

// deregister closes the provider's client: its connection ends, and the
// registry drops its instance, as after a crash.
func (r *nacosRegistry) deregister(p *provider) {
	if c := r.clients[p]; c != nil {
		c.CloseClient()
		delete(r.clients, p)
	}
}

// endNotes says whether the registry still holds both consumers'
// subscriptions at the end of the run.
func (r *nacosRegistry) endNotes() []string {
	return []string{fmt.Sprintf("subscriptions the registry holds for %q at the end: %d (one per consumer: 2 when none was lost)",
		service, r.srv.SubscriberCount("", "", service))}
}

func (r *nacosRegistry) stop()        { r.srv.Stop() }
func (r *nacosRegistry) start() error { return r.srv.Start() }

func (r *nacosRegistry) rebound() (resolver.Builder, string) {
	return r.b, "rebound:///" + service
}

func (r *nacosRegistry) baseline() (resolver.Builder, string) {
	return &sdkOnceBuilder{client: r.base, service: service}, "nacos:///" + service
}

func (r *nacosRegistry) close() {
	for p, c := range r.clients {
		c.CloseClient()
		delete(r.clients, p)
	}
	if r.b != nil {
		_ = r.b.Close()
	}
	if r.m != nil {
		_ = r.m.Close()
	}
	if r.reg != nil {
		_ = r.reg.Close()
	}
	if r.consumer != nil {
		r.consumer.CloseClient()
	}
	if r.base != nil {
		r.base.CloseClient()
	}
	if r.srv != nil {
		r.srv.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// ---- etcd ----

// etcdTarget is the naming/endpoints target the providers register under
// ("svc/orders/<addr>" with {"Addr": ...}), as a service using etcd's
// endpoints.Manager does today. Both consumers read these same keys:
// etcd's resolver as "etcd:///svc/orders", rebound's through the etcd
// adapter with etcd.WithLayout(etcd.EndpointsLayout(nil)) as
// "rebound:///svc/orders".
const etcdTarget = "svc/" + service

type etcdRegistry struct {
	dir      string
	c        *etcdtest.Cluster
	admin    *clientv3.Client // providers and compaction: every member
	consumer *clientv3.Client // rebound's: member 0 only
	base     *clientv3.Client // the baseline's: member 0 only
	reg      *etcd.Registry
	m        *subscriber.Manager
	b        *reboundgrpc.Builder
	regs     map[*provider]*etcdReg
	conns    map[string]*connLog // by side name: "rebound", "baseline"
}

func (r *etcdRegistry) readyAfter(side string, t time.Time) (time.Time, bool) {
	if l := r.conns[side]; l != nil {
		return l.readyAfter(t)
	}
	return time.Time{}, false
}

// etcdReg is one provider's endpoint.
type etcdReg struct {
	reg subscriber.Registration
}

func quietClient(eps ...string) (*clientv3.Client, error) {
	return clientv3.New(etcd.ClientConfig(zap.NewNop(), eps...))
}

func newEtcdRegistry() (_ *etcdRegistry, err error) {
	r := &etcdRegistry{regs: map[*provider]*etcdReg{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = tmpDir(); err != nil {
		return nil, err
	}
	if r.c, err = etcdtest.NewCluster(3, etcdtest.WithDir(r.dir)); err != nil {
		return nil, err
	}
	if r.admin, err = quietClient(r.c.Endpoints()...); err != nil {
		return nil, err
	}
	if r.consumer, err = quietClient(r.c.Endpoint(0)); err != nil {
		return nil, err
	}
	if r.base, err = clientv3.New(clientv3.Config{Endpoints: []string{r.c.Endpoint(0)}, Logger: zap.NewNop()}); err != nil {
		return nil, err
	}
	r.conns = map[string]*connLog{"rebound": watchConn(r.consumer), "baseline": watchConn(r.base)}
	if r.reg, err = etcd.New(r.consumer, etcd.WithLayout(etcd.EndpointsLayout(nil))); err != nil {
		return nil, err
	}
	if r.m, err = subscriber.New(r.reg); err != nil {
		return nil, err
	}
	if r.b, err = reboundgrpc.NewBuilder(r.m); err != nil {
		return nil, err
	}
	return r, nil
}

// register writes p's endpoint in the naming/endpoints layout through
// etcd.Register (a lease kept alive, and the key put back if the lease is
// lost: a bare endpoints.Manager.AddEndpoint on a lease with KeepAlive
// loses its key for good after an outage longer than its TTL, which would
// take the providers away from both consumers here).
func (r *etcdRegistry) register(p *provider) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := subscriber.Instance{IP: "127.0.0.1", Port: p.port, Weight: 1, Healthy: true, Enabled: true}
	reg, err := etcd.Register(ctx, r.admin, subscriber.Key{Service: etcdTarget}, in, etcd.WithLayout(etcd.EndpointsLayout(nil)))
	if err != nil {
		return err
	}
	r.regs[p] = &etcdReg{reg: reg}
	return nil
}

// deregister deletes p's endpoint (its lease revoked).
func (r *etcdRegistry) deregister(p *provider) {
	g := r.regs[p]
	if g == nil {
		return
	}
	delete(r.regs, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.reg.Shutdown(ctx)
}

// deregisterer is p's etcd Registration, for Drain (-rolling).
func (r *etcdRegistry) deregisterer(p *provider) subscriber.Registration { return r.regs[p].reg }

// forget drops p's registration once it was shut down (-rolling).
func (r *etcdRegistry) forget(p *provider) { delete(r.regs, p) }

func (r *etcdRegistry) stop() { r.c.Stop() }

func (r *etcdRegistry) start() error {
	if err := r.c.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.c.WaitReady(ctx)
}

// compact compacts the cluster at its current revision.
func (r *etcdRegistry) compact() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.admin.Get(ctx, "compact-probe")
	if err != nil {
		return err
	}
	_, err = r.admin.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	return err
}

func (r *etcdRegistry) rebound() (resolver.Builder, string) {
	return r.b, "rebound:///" + etcdTarget
}

func (r *etcdRegistry) baseline() (resolver.Builder, string) {
	b, err := etcdresolver.NewBuilder(r.base)
	if err != nil {
		panic(err) // NewBuilder never fails in etcd v3.7
	}
	return b, "etcd:///" + etcdTarget
}

func (r *etcdRegistry) close() {
	for p := range r.regs {
		r.deregister(p)
	}
	if r.b != nil {
		_ = r.b.Close()
	}
	if r.m != nil {
		_ = r.m.Close()
	}
	if r.reg != nil {
		_ = r.reg.Close()
	}
	for _, l := range r.conns {
		l.stop()
	}
	for _, c := range []*clientv3.Client{r.consumer, r.base, r.admin} {
		if c != nil {
			_ = c.Close()
		}
	}
	if r.c != nil {
		r.c.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// ---- Nacos, for -rolling ----

// nacosRolling is the Nacos registry of -rolling: each provider registers
// through nacos.Register on a client of its own, so that Drain can
// deregister it (Shutdown returns once the server no longer lists it).
type nacosRolling struct {
	*nacosRegistry
	provs map[*provider]*nacosProv
}

type nacosProv struct {
	client naming_client.INamingClient
	reg    subscriber.Registration
}

func newNacosRolling() (*nacosRolling, error) {
	r, err := newNacosRegistry()
	if err != nil {
		return nil, err
	}
	return &nacosRolling{nacosRegistry: r, provs: map[*provider]*nacosProv{}}, nil
}

func (r *nacosRolling) register(p *provider) error {
	c, err := nacosClient(r.srv, r.dir, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := nacos.Register(ctx, c, subscriber.Key{Service: service},
		subscriber.Instance{IP: "127.0.0.1", Port: p.port, Weight: 1, Healthy: true, Enabled: true})
	if err != nil {
		c.CloseClient()
		return fmt.Errorf("register %s: %w", p.name, err)
	}
	r.provs[p] = &nacosProv{client: c, reg: reg}
	return nil
}

func (r *nacosRolling) deregisterer(p *provider) subscriber.Registration { return r.provs[p].reg }

// forget closes p's registration and client once it was shut down.
func (r *nacosRolling) forget(p *provider) {
	if np := r.provs[p]; np != nil {
		_ = np.reg.Close()
		np.client.CloseClient()
		delete(r.provs, p)
	}
}

func (r *nacosRolling) close() {
	for p := range r.provs {
		r.forget(p)
	}
	r.nacosRegistry.close()
}
