package reboundgrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
)

// slowBackend is a backend whose every RPC takes work (20 ms), so that a
// server stopped without a drain has calls in flight to fail.
func slowBackend(t *testing.T, work time.Duration) *backend {
	t.Helper()
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	b := &backend{srv: s, lis: lis, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}
	t.Cleanup(b.stop)
	return b
}

// callers runs n goroutines making fail-fast RPCs on cc, one every 5 ms
// each, until stop, and counts the failures.
type callers struct {
	ok, failed atomic.Int64
	first      atomic.Value
	done       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

func startCallers(t *testing.T, cc *grpc.ClientConn, n int) *callers {
	c := &callers{done: make(chan struct{})}
	for range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-c.done:
					return
				case <-tick.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := check(ctx, cc)
				cancel()
				if err != nil {
					c.failed.Add(1)
					c.first.CompareAndSwap(nil, err)
				} else {
					c.ok.Add(1)
				}
			}
		}()
	}
	t.Cleanup(c.stop)
	return c
}

// stop ends the calls and waits for the goroutines. It is idempotent.
func (c *callers) stop() {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
}

// TestDrainFailsNoCall: three providers registered in etcd with
// etcd.Register, four callers through rebound's resolver. Drain of one
// (deregister, DefaultDrainWait, GracefulStop) fails no call, and the
// instance is gone from etcd when it returns. The baseline, a plain stop
// (srv.Stop, then the deregistration, as a process that exits does), is
// logged beside it.
func TestDrainFailsNoCall(t *testing.T) {
	env := newEtcdEnv(t)
	a, b, c := slowBackend(t, 20*time.Millisecond), slowBackend(t, 20*time.Millisecond), slowBackend(t, 20*time.Millisecond)
	env.register(t, a, b, c)
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, a, b, c)

	load := startCallers(t, cc, 4)
	time.Sleep(300 * time.Millisecond) // calls in flight on every backend
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := reboundgrpc.Drain(ctx, a.srv, reboundgrpc.DefaultDrainWait, env.regs[a]); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	drained := load.failed.Load()
	resp, err := env.client.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), a.addr) {
			t.Errorf("after Drain the registry still lists %s (key %s)", a.addr, kv.Key)
		}
	}

	// Baseline: a plain stop of b.
	before := load.failed.Load()
	b.srv.Stop()
	if err := env.regs[b].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	load.stop()
	plain := load.failed.Load() - before
	t.Logf("calls: %d ok; failed during Drain: %d; failed during a plain stop: %d (first error %v)", load.ok.Load(), drained, plain, load.first.Load())
	if drained != 0 {
		t.Fatalf("%d calls failed during Drain (first error %v), want 0", drained, load.first.Load())
	}
}

// settle is how long the baseline watches after the plain stop.
const settle = time.Second

// fakeReg is a Registration whose Shutdown returns err.
type fakeReg struct {
	subscriber.Registration // nil: only Shutdown and Key are called
	err                     error
	called                  atomic.Int32
}

func (f *fakeReg) Shutdown(ctx context.Context) error { f.called.Add(1); return f.err }
func (f *fakeReg) Key() subscriber.Key                { return subscriber.Key{Service: "orders"} }

func TestDrainBadInput(t *testing.T) {
	srv := grpc.NewServer()
	defer srv.Stop()
	var nilReg *fakeReg
	cases := []struct {
		name string
		err  error
		arg  string
	}{
		{"nil srv", reboundgrpc.Drain(context.Background(), nil, 0, &fakeReg{}), "srv"},
		{"nil reg", reboundgrpc.Drain(context.Background(), srv, 0, nil), "regs"},
		{"typed nil reg", reboundgrpc.Drain(context.Background(), srv, 0, nilReg), "regs"},
		//lint:ignore SA1012 a nil ctx is the bad input under test
		{"nil ctx", reboundgrpc.Drain(nil, srv, 0, &fakeReg{}), "ctx"},
		{"negative wait", reboundgrpc.Drain(context.Background(), srv, -time.Second, &fakeReg{}), "wait"},
	}
	for _, c := range cases {
		var ae *rebound.ArgumentError
		if !errors.As(c.err, &ae) || ae.Arg != c.arg || !errors.Is(c.err, rebound.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an ArgumentError naming %s", c.name, c.err, c.arg)
		}
	}
	// Nothing was stopped: a server refused for bad input still serves.
	b := startBackend(t)
	if err := reboundgrpc.Drain(context.Background(), b.srv, -1, &fakeReg{}); err == nil {
		t.Fatal("Drain with a negative wait returned nil")
	}
	cc, err := grpc.NewClient("passthrough:///"+b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := check(context.Background(), cc); err != nil {
		t.Fatalf("a Drain refused for bad input stopped the server: %v", err)
	}
}

// A failed deregistration is returned, and the server is stopped all the
// same; a ctx that ends during the wait stops the server at once.
func TestDrainErrorsAndCancel(t *testing.T) {
	b := startBackend(t)
	bad := &fakeReg{err: errors.New("registry unreachable")}
	err := reboundgrpc.Drain(context.Background(), b.srv, 0, bad)
	if err == nil || !errors.Is(err, bad.err) || bad.called.Load() != 1 {
		t.Fatalf("Drain with a failing Shutdown = %v (Shutdown called %d times)", err, bad.called.Load())
	}
	if err := b.srv.Serve(b.lis); !errors.Is(err, grpc.ErrServerStopped) {
		t.Fatalf("server not stopped after Drain: Serve = %v", err)
	}

	c := startBackend(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reboundgrpc.Drain(ctx, c.srv, time.Hour, &fakeReg{}) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Drain after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Drain did not return after its ctx was cancelled")
	}
	if err := c.srv.Serve(c.lis); !errors.Is(err, grpc.ErrServerStopped) {
		t.Fatalf("server not stopped after a cancelled Drain: Serve = %v", err)
	}
}
