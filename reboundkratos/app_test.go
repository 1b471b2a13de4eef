package reboundkratos_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-kratos/kratos/v2"
	klog "github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/registry"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func TestMain(m *testing.M) {
	klog.SetLogger(klog.NewStdLogger(io.Discard)) // kratos' own logs: the tests report what matters
	nacostest.VerifyTestMain(m)
}

// testTimeout bounds every real-time wait (generous: the machine is busy).
const testTimeout = 30 * time.Second

// testDrain is the providers' drain delay.
const testDrain = time.Second

// provider is a kratos app with a gRPC server (kratos' server serves
// grpc-go's health service) registered through a Registrar.
type provider struct {
	app  *kratos.App
	addr string
	done chan error
	once sync.Once
}

func startProvider(t testing.TB, name string, r registry.Registrar) *provider {
	t.Helper()
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := kgrpc.NewServer(kgrpc.Listener(lis), kgrpc.Address(lis.Addr().String()))
	app := kratos.New(kratos.ID(uuid.NewString()), kratos.Name(name), kratos.Version("v1"),
		kratos.Metadata(map[string]string{"zone": "z1"}), kratos.Server(srv), kratos.Registrar(r),
		kratos.RegistrarTimeout(testTimeout))
	p := &provider{app: app, addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() { p.done <- app.Run() }()
	t.Cleanup(func() { p.stop(t) })
	// Run registers after the server started; wait for the registration.
	subscribertest.Eventually(t, testTimeout, "provider "+p.addr+" registered", func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("provider %s: Run: %v", p.addr, err)
		default:
		}
		return registered(app) // not app.Endpoint(): kratos v2.8.3 reads it without its lock
	})
	return p
}

// registered is set by the test's Registrar wrappers.
var regDone sync.Map // app ID -> true

func registered(app *kratos.App) bool {
	_, ok := regDone.Load(app.ID())
	return ok
}

// trackRegistrar marks instances registered once Register returned nil.
type trackRegistrar struct{ registry.Registrar }

func (r trackRegistrar) Register(ctx context.Context, si *registry.ServiceInstance) error {
	err := r.Registrar.Register(ctx, si)
	if err == nil {
		regDone.Store(si.ID, true)
	}
	return err
}

// stop stops the app (Deregister, drain, then the servers) and waits for
// Run to return.
func (p *provider) stop(t testing.TB) {
	p.once.Do(func() {
		if err := p.app.Stop(); err != nil {
			t.Errorf("provider %s: Stop: %v", p.addr, err)
		}
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("provider %s: Run: %v", p.addr, err)
			}
		case <-time.After(testTimeout):
			t.Errorf("provider %s: Run did not return", p.addr)
		}
	})
}

// dialKratos dials discovery:///name through kratos' gRPC client and d.
func dialKratos(t testing.TB, d registry.Discovery, name string) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cc, err := kgrpc.DialInsecure(ctx, kgrpc.WithEndpoint("discovery:///"+name), kgrpc.WithDiscovery(d),
		kgrpc.WithPrintDiscoveryDebugLog(false))
	if err != nil {
		t.Fatalf("kratos DialInsecure discovery:///%s: %v", name, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// check makes one health Check RPC; a NOT_SERVING answer (a server that
// is stopping) counts as a failure too.
func check(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (string, error) {
	var p peer.Peer
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, append(opts, grpc.Peer(&p))...)
	if err != nil {
		return "", err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return p.Addr.String(), errNotServing
	}
	return p.Addr.String(), nil
}

type notServing struct{}

func (notServing) Error() string { return "health: NOT_SERVING" }

var errNotServing error = notServing{}

// waitProviders makes RPCs until every provider has answered one.
func waitProviders(t testing.TB, cc *grpc.ClientConn, want ...*provider) {
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
		for _, p := range want {
			all = all && seen[p.addr]
		}
		if all {
			return
		}
	}
	t.Fatalf("providers not all reached (seen %v, last error %v)", seen, last)
}

// rpcLoad makes Check RPCs at about 200 per second until stop.
type rpcLoad struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	mu         sync.Mutex
	by         map[string]int
	done       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

func startLoad(t testing.TB, cc *grpc.ClientConn) *rpcLoad {
	l := &rpcLoad{done: make(chan struct{}), by: map[string]int{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			addr, err := check(ctx, cc)
			cancel()
			if err != nil {
				l.failed.Add(1)
				l.firstErr.CompareAndSwap(nil, err)
				continue
			}
			l.ok.Add(1)
			l.mu.Lock()
			l.by[addr]++
			l.mu.Unlock()
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *rpcLoad) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *rpcLoad) count(addr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[addr]
}
