package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-kratos/kratos/v2"
	"github.com/go-kratos/kratos/v2/registry"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	"github.com/google/uuid"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// config is the scenario's settings (see the flags in main.go).
type config struct {
	interval time.Duration // between two RPCs of one consumer
	timeout  time.Duration // of each RPC
	phase    time.Duration // length of each phase after its event
	outage   time.Duration // how long Nacos is down at the start and in the restart
	cacheDir string        // the SDK clients' cache directory (removed by run)
	progress func(string)  // phase changes; nil for none
}

// Phases (columns of the per-phase counters).
const (
	phaseStart = iota
	phaseNew
	phaseRestart
	phaseStop
	numPhases
)

// provider is one kratos app (kratos' gRPC server, which serves grpc-go's
// health service) registered through its fleet's Registrar, with its own
// Nacos client as a separate process has.
type provider struct {
	name, addr string
	app        *kratos.App
	client     naming_client.INamingClient
	done       chan error
	registered time.Time
}

// fleet is one side: providers and a consumer on one registry
// implementation.
type fleet struct {
	name      string
	service   string // kratos app name; Nacos service <service>.grpc
	registrar func(naming_client.INamingClient) registry.Registrar
	discovery registry.Discovery
	closers   []func()

	consumer  naming_client.INamingClient
	providers map[string]*provider
	cc        *grpc.ClientConn

	mu           sync.Mutex
	phase        int
	ok, failed   [numPhases]int
	firstErr     [numPhases]string
	firstSeen    map[string]time.Time // by address
	dialFailures int
	dialErr      string
	upAt         time.Time // the first RPC answered after the registry came back
}

type result struct {
	cfg      config
	fleets   []*fleet
	backUpAt time.Time // the registry accepted connections again (start)
	missing  map[*fleet][]string
}

func (cfg config) say(s string) {
	if cfg.progress != nil {
		cfg.progress(s)
	}
}

func newClient(cfg config, srv *nacostest.Server) (naming_client.INamingClient, error) {
	cc := &constant.ClientConfig{TimeoutMs: 1000, NotLoadCacheAtStart: true, UpdateCacheWhenEmpty: true,
		CacheDir: cfg.cacheDir, LogDir: nacostest.LogDir(), LogLevel: "error", TLSCfg: constant.TLSConfig{Appointed: true}}
	return clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: []constant.ServerConfig{srv.ServerConfig()}})
}

func (f *fleet) startProvider(cfg config, srv *nacostest.Server, name string) (*provider, error) {
	client, err := newClient(cfg, srv)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		client.CloseClient()
		return nil, err
	}
	s := kgrpc.NewServer(kgrpc.Listener(lis), kgrpc.Address(lis.Addr().String()))
	p := &provider{name: name, addr: lis.Addr().String(), client: client, done: make(chan error, 1)}
	p.app = kratos.New(kratos.ID(uuid.NewString()), kratos.Name(f.service), kratos.Version("v1"), kratos.Server(s),
		kratos.Registrar(f.registrar(client)), kratos.AfterStart(func(context.Context) error {
			p.registered = time.Now()
			return nil
		}))
	go func() { p.done <- p.app.Run() }()
	f.providers[name] = p
	deadline := time.After(30 * time.Second)
	for p.registeredAt().IsZero() {
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s %s: Run: %w", f.name, name, err)
		case <-deadline:
			return nil, fmt.Errorf("%s %s: not started in 30 s", f.name, name)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return p, nil
}

var regMu sync.Mutex

func (p *provider) registeredAt() time.Time {
	regMu.Lock()
	defer regMu.Unlock()
	return p.registered
}

func (p *provider) stop() {
	_ = p.app.Stop()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
	p.client.CloseClient()
}

// dialLoop dials discovery:///<service>.grpc through kratos' gRPC client
// until it succeeds, counting failures.
func (f *fleet) dialLoop(ctx context.Context) error {
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		cc, err := kgrpc.DialInsecure(dctx, kgrpc.WithEndpoint("discovery:///"+f.service+".grpc"),
			kgrpc.WithDiscovery(f.discovery), kgrpc.WithPrintDiscoveryDebugLog(false))
		cancel()
		if err == nil {
			f.cc = cc
			return nil
		}
		f.mu.Lock()
		f.dialFailures++
		if f.dialErr == "" {
			f.dialErr = err.Error()
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no dial succeeded: %w", f.name, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// load makes one health Check per interval until ctx ends.
func (f *fleet) load(ctx context.Context, cfg config, backUp func() time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var p peer.Peer
		rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		resp, err := healthpb.NewHealthClient(f.cc).Check(rctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		cancel()
		now := time.Now()
		f.mu.Lock()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			f.ok[f.phase]++
			addr := p.Addr.String()
			if _, ok := f.firstSeen[addr]; !ok {
				f.firstSeen[addr] = now
			}
			if up := backUp(); f.upAt.IsZero() && !up.IsZero() {
				f.upAt = now
			}
		} else if ctx.Err() == nil {
			f.failed[f.phase]++
			if f.firstErr[f.phase] == "" {
				if err == nil {
					err = fmt.Errorf("health: %v", resp.GetStatus())
				}
				f.firstErr[f.phase] = err.Error()
			}
		}
		f.mu.Unlock()
	}
}

func (f *fleet) setPhase(ph int) {
	f.mu.Lock()
	f.phase = ph
	f.mu.Unlock()
}

// seen is how long after p registered the consumer's first RPC reached
// it; -1 for never.
func (f *fleet) seen(p *provider) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.firstSeen[p.addr]
	if !ok {
		return -1
	}
	return max(at.Sub(p.registeredAt()), 0)
}

func run(cfg config) (res *result, err error) {
	srv, err := nacostest.NewServer()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rebound := &fleet{name: "rebound", service: "hello-rebound"}
	rebound.registrar = func(c naming_client.INamingClient) registry.Registrar {
		r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatNacos,
			func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
				return nacos.Register(ctx, c, key, inst)
			})
		return r
	}
	baseline := &fleet{name: "baseline", service: "hello-baseline"}
	baseline.registrar = func(c naming_client.INamingClient) registry.Registrar { return &contribRegistry{client: c} }
	fleets := []*fleet{rebound, baseline}
	for _, f := range fleets {
		f.providers = map[string]*provider{}
		f.firstSeen = map[string]time.Time{}
	}
	defer func() {
		for _, f := range fleets {
			if f.cc != nil {
				_ = f.cc.Close()
			}
			for _, p := range f.providers {
				p.stop()
			}
			for i := len(f.closers) - 1; i >= 0; i-- {
				f.closers[i]()
			}
		}
	}()

	cfg.say("providers p1-p3")
	for _, f := range fleets {
		for _, n := range []string{"p1", "p2", "p3"} {
			if _, err := f.startProvider(cfg, srv, n); err != nil {
				return nil, err
			}
		}
	}

	// Start: the consumers start while Nacos refuses connections.
	cfg.say("Nacos down; consumers start")
	srv.SetRefuseConnections(true)
	srv.DropStreams()
	for _, f := range fleets {
		c, err := newClient(cfg, srv)
		if err != nil {
			return nil, err
		}
		f.consumer = c
		f.closers = append(f.closers, c.CloseClient)
	}
	reg, err := nacos.New(rebound.consumer)
	if err != nil {
		return nil, err
	}
	m, err := subscriber.New(reg)
	if err != nil {
		return nil, err
	}
	d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos)
	if err != nil {
		return nil, err
	}
	rebound.discovery = d
	rebound.closers = append(rebound.closers, func() { _ = reg.Close() }, func() { _ = m.Close() }, func() { _ = d.Close() })
	baseline.discovery = &contribRegistry{client: baseline.consumer}

	res = &result{cfg: cfg, fleets: fleets, missing: map[*fleet][]string{}}
	var backMu sync.Mutex
	backUp := func() time.Time {
		backMu.Lock()
		defer backMu.Unlock()
		return res.backUpAt
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.outage+60*time.Second)
	defer cancel()
	var dials sync.WaitGroup
	dialErrs := make([]error, len(fleets))
	for i, f := range fleets {
		dials.Add(1)
		go func() {
			defer dials.Done()
			dialErrs[i] = f.dialLoop(ctx)
		}()
	}
	time.Sleep(cfg.outage)
	srv.SetRefuseConnections(false)
	backMu.Lock()
	res.backUpAt = time.Now()
	backMu.Unlock()
	cfg.say("Nacos up")
	dials.Wait()
	if err := errors.Join(dialErrs...); err != nil {
		return nil, err
	}
	lctx, lcancel := context.WithCancel(context.Background())
	var loads sync.WaitGroup
	for _, f := range fleets {
		loads.Add(1)
		go f.load(lctx, cfg, backUp, &loads)
	}
	defer func() {
		lcancel()
		loads.Wait()
	}()
	time.Sleep(cfg.phase)

	// A new provider.
	cfg.say("p4 starts")
	for _, f := range fleets {
		f.setPhase(phaseNew)
		if _, err := f.startProvider(cfg, srv, "p4"); err != nil {
			return nil, err
		}
	}
	time.Sleep(cfg.phase)

	// Restart with fresh state, the first register and subscribe of
	// every new connection rejected (TPS control); then p5.
	cfg.say("Nacos restarts with rejections")
	for _, f := range fleets {
		f.setPhase(phaseRestart)
	}
	for _, rt := range []string{nacostest.RequestInstance, nacostest.RequestSubscribeService} {
		if err := srv.SetRejection(rt, nacostest.Rejection{FirstPerConnection: 1}); err != nil {
			return nil, err
		}
	}
	srv.Stop()
	time.Sleep(cfg.outage)
	if err := srv.Start(); err != nil {
		return nil, err
	}
	time.Sleep(cfg.phase)
	cfg.say("p5 starts")
	for _, f := range fleets {
		if _, err := f.startProvider(cfg, srv, "p5"); err != nil {
			return nil, err
		}
	}
	time.Sleep(2 * cfg.phase)

	// App.Stop of p1.
	cfg.say("p1 stops (App.Stop)")
	for _, f := range fleets {
		f.setPhase(phaseStop)
	}
	var stops sync.WaitGroup
	for _, f := range fleets {
		p := f.providers["p1"]
		delete(f.providers, "p1")
		stops.Add(1)
		go func() {
			defer stops.Done()
			p.stop()
		}()
	}
	stops.Wait()
	time.Sleep(cfg.phase)

	// Providers running but not listed by Nacos.
	for _, f := range fleets {
		listed := map[uint64]bool{}
		for _, in := range srv.Instances("", "", f.service+".grpc") {
			listed[in.Port] = true
		}
		for _, n := range []string{"p2", "p3", "p4", "p5"} {
			_, port, _ := net.SplitHostPort(f.providers[n].addr)
			var pn uint64
			_, _ = fmt.Sscan(port, &pn)
			if !listed[pn] {
				res.missing[f] = append(res.missing[f], n)
			}
		}
	}
	return res, nil
}
