package reboundgrpc_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) { nacostest.VerifyTestMain(m) }

// testPolicy keeps retries fast in tests.
var testPolicy = rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}

const testTimeout = 20 * time.Second

const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// backend is a real grpc-go server with the health service on loopback.
type backend struct {
	srv  *grpc.Server
	lis  net.Listener
	addr string
	port uint64
}

func startBackend(t testing.TB) *backend {
	t.Helper()
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	b := &backend{srv: s, lis: lis, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}
	t.Cleanup(b.stop)
	return b
}

func (b *backend) stop() { b.srv.Stop() }

func (b *backend) nacos() nacostest.Instance {
	return nacostest.Instance{Ip: "127.0.0.1", Port: b.port, Weight: 1, Healthy: true, Enable: true}
}

func (b *backend) instance() subscriber.Instance {
	return subscriber.Instance{ID: b.addr, IP: "127.0.0.1", Port: b.port, Weight: 1, Healthy: true, Enabled: true}
}

// nacosEnv is a nacostest server, a real SDK client, the adapter, a
// Manager and a Builder.
type nacosEnv struct {
	srv     *nacostest.Server
	client  naming_client.INamingClient
	reg     *nacos.Registry
	m       *subscriber.Manager
	b       *reboundgrpc.Builder
	service string
}

func newNacosEnv(t testing.TB, bopts ...reboundgrpc.Option) *nacosEnv {
	t.Helper()
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  nacostest.ClientConfig(t),
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseClient)
	reg, err := nacos.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() }) // after the Manager: cleanups run last-in first-out
	m, err := subscriber.New(reg, subscriber.WithPolicy(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	b, err := reboundgrpc.NewBuilder(m, bopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &nacosEnv{srv: srv, client: client, reg: reg, m: m, b: b, service: "orders"}
}

func (e *nacosEnv) register(t testing.TB, bs ...*backend) {
	t.Helper()
	for _, b := range bs {
		if err := e.srv.RegisterInstance("", "", e.service, b.nacos()); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *nacosEnv) deregister(bs ...*backend) {
	for _, b := range bs {
		e.srv.DeregisterInstance("", "", e.service, b.nacos())
	}
}

// dial returns a ClientConn through b, closed at cleanup.
func dial(t testing.TB, b *reboundgrpc.Builder, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(b),
		grpc.WithDefaultServiceConfig(roundRobin),
	}, opts...)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// check makes one health Check RPC and returns the backend's address.
func check(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (string, error) {
	var p peer.Peer
	opts = append(opts, grpc.Peer(&p))
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	if err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// waitBackends makes RPCs until every address in want has answered one,
// and fails the test at the deadline. Errors in between are tolerated.
func waitBackends(t testing.TB, cc *grpc.ClientConn, want ...*backend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	seen := map[string]bool{}
	var last error
	for ctx.Err() == nil {
		addr, err := check(ctx, cc, grpc.WaitForReady(true))
		if err != nil {
			last = err
			continue
		}
		seen[addr] = true
		all := true
		for _, b := range want {
			all = all && seen[b.addr]
		}
		if all {
			return
		}
	}
	t.Fatalf("backends %v not all reached (seen %v, last error %v)", addrs(want), seen, last)
}

func addrs(bs []*backend) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.addr)
	}
	return out
}

// rpcLoad makes health Check RPCs through a ClientConn in a goroutine, one
// every 5 ms (each with a 1 s timeout), until stop: a client that keeps
// calling through an outage.
type rpcLoad struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value // the first error, if any
	done       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

// startLoad starts an rpcLoad on cc; it is stopped at cleanup if the test
// does not stop it.
func startLoad(t testing.TB, cc *grpc.ClientConn) *rpcLoad {
	l := &rpcLoad{done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := check(ctx, cc)
			cancel()
			if err != nil {
				l.failed.Add(1)
				l.firstErr.CompareAndSwap(nil, err)
			} else {
				l.ok.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(l.stop)
	return l
}

// stop ends the load and waits for its goroutine. It is idempotent.
func (l *rpcLoad) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

// eventually polls cond until it holds or the test deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	subscribertest.Eventually(t, testTimeout, what, cond)
}

// fakeCC is a resolver.ClientConn recording what a resolver sends.
type fakeCC struct {
	mu      sync.Mutex
	states  []int // endpoint counts of UpdateState calls
	errs    []error
	reject  int // reject the next n non-empty states
	updates chan struct{}
}

func newFakeCC() *fakeCC { return &fakeCC{updates: make(chan struct{}, 1000)} }

func (f *fakeCC) UpdateState(s resolver.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states = append(f.states, len(s.Endpoints))
	select {
	case f.updates <- struct{}{}:
	default:
	}
	if len(s.Endpoints) == 0 {
		return balancer.ErrBadResolverState
	}
	if f.reject > 0 {
		f.reject--
		return balancer.ErrBadResolverState
	}
	return nil
}

func (f *fakeCC) ReportError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
	select {
	case f.updates <- struct{}{}:
	default:
	}
}

func (f *fakeCC) NewAddress([]resolver.Address) {}

func (f *fakeCC) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

func (f *fakeCC) snapshot() ([]int, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.states...), append([]error(nil), f.errs...)
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustTarget(t testing.TB, s string) resolver.Target {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return resolver.Target{URL: *u}
}
