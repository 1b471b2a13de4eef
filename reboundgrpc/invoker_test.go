package reboundgrpc_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
)

// flaky is a health server whose first failN Check calls fail with code
// (and trailer), registered in Nacos.
func startFlaky(t *testing.T, failN int64, code codes.Code, trailer metadata.MD) (*backend, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if n := calls.Add(1); n <= failN {
			if trailer != nil {
				_ = grpc.SetTrailer(ctx, trailer)
			}
			return nil, status.Error(code, "injected")
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	b := &backend{srv: s, lis: lis, addr: lis.Addr().String(), port: uint64(lis.Addr().(*net.TCPAddr).Port)}
	t.Cleanup(b.stop)
	return b, &calls
}

const checkMethod = "/grpc.health.v1.Health/Check"

type hookLog struct {
	mu        sync.Mutex
	queued    []failback.Task
	succeeded chan failback.Task
	gaveUp    chan failback.Task
}

func newHookLog() *hookLog {
	return &hookLog{succeeded: make(chan failback.Task, 10), gaveUp: make(chan failback.Task, 10)}
}

func (h *hookLog) hooks() rebound.Observer {
	return rebound.ObserverFunc(func(e rebound.Event) {
		t := e.Detail.(failback.Task)
		switch e.Kind {
		case rebound.EventQueued:
			h.mu.Lock()
			h.queued = append(h.queued, t)
			h.mu.Unlock()
		case rebound.EventRecovered:
			h.succeeded <- t
		case rebound.EventGiveUp:
			h.gaveUp <- t
		}
	})
}

// TestFailbackOverClientConn: a fire-and-forget call that fails with
// Unavailable is queued by failback and retried through the ClientConn's
// balancer until it succeeds; InvalidArgument is returned at once.
func TestFailbackOverClientConn(t *testing.T) {
	env := newNacosEnv(t)
	fl, calls := startFlaky(t, 2, codes.Unavailable, nil)
	env.register(t, fl)
	cc := dial(t, env.b, "rebound:///orders")
	waitBackends(t, cc, fl) // 1 call, fails? waitBackends tolerates errors
	calls.Store(0)

	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)),
		failback.WithPolicy(rebound.Policy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, rebound.WithMaxAttempts(4), rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()

	res, err := fb.Invoke(context.Background(), &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}})
	if err != nil || res != nil {
		t.Fatalf("Invoke: %v, %v; want queued (nil, nil)", res, err)
	}
	select {
	case task := <-h.succeeded:
		if task.Attempts != 3 {
			t.Fatalf("succeeded after %d attempts, want 3", task.Attempts)
		}
	case task := <-h.gaveUp:
		t.Fatalf("gave up: %v", task.Err)
	case <-time.After(testTimeout):
		t.Fatal("no retry succeeded")
	}

	// A reply message in Args[1] is filled and returned.
	reply := &healthpb.HealthCheckResponse{}
	res, err = fb.Invoke(context.Background(), &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}, reply}})
	if err != nil || res != reply || reply.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Invoke with a reply: %v, %v (%v)", res, err, reply)
	}
}

func TestFailbackPermanent(t *testing.T) {
	env := newNacosEnv(t)
	bad, _ := startFlaky(t, 1000, codes.InvalidArgument, nil)
	env.register(t, bad)
	cc := dial(t, env.b, "rebound:///orders")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// Wait until the ClientConn has the backend.
	for {
		_, err := check(ctx, cc, grpc.WaitForReady(true))
		if status.Code(err) == codes.InvalidArgument {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)), failback.WithPolicy(failback.DefaultPolicy(), rebound.WithMaxAttempts(4), rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}})
	if status.Code(err) != codes.InvalidArgument || !rebound.IsPermanent(err) {
		t.Fatalf("InvalidArgument: %v, want it returned at once, marked permanent", err)
	}

}

// TestFailbackPushback: a ResourceExhausted answer with a
// grpc-retry-pushback-ms trailer is queued with at least that delay.
func TestFailbackPushback(t *testing.T) {
	busy, calls := startFlaky(t, 1, codes.ResourceExhausted, metadata.Pairs(reboundgrpc.PushbackTrailer, "300"))
	cc, err := grpc.NewClient("passthrough:///"+busy.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true))),
		failback.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}, rebound.WithMaxAttempts(4), rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if _, err := fb.Invoke(context.Background(), &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}}); err != nil {
		t.Fatalf("Invoke: %v, want queued", err)
	}
	select {
	case <-h.succeeded:
	case <-time.After(testTimeout):
		t.Fatal("no retry succeeded")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.queued) != 1 || h.queued[0].Delay < 300*time.Millisecond {
		t.Fatalf("queued %+v, want one task delayed by at least the 300 ms pushback", h.queued)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want 2", calls.Load())
	}
}

// TestInvokerPushback: the Invoker reads the trailer of a failed call.
func TestInvokerPushback(t *testing.T) {
	busy, _ := startFlaky(t, 1, codes.ResourceExhausted, metadata.Pairs(reboundgrpc.PushbackTrailer, "300"))
	cc, err := grpc.NewClient("passthrough:///"+busy.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	inv := reboundgrpc.NewInvoker(cc)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err = inv.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}, Attachments: map[string]string{"x-k": "v"}})
	d, ok := rebound.RetryAfterDelay(err)
	if !ok || d != 300*time.Millisecond || !failback.DefaultRetryable(err) {
		t.Fatalf("ResourceExhausted with pushback: %v (retry after %v %v)", err, d, ok)
	}
	if _, err := inv.Invoke(ctx, &cluster.Invocation{Method: checkMethod, Args: []any{&healthpb.HealthCheckRequest{}}}); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if _, err := inv.Invoke(ctx, &cluster.Invocation{Method: checkMethod}); !rebound.IsPermanent(err) {
		t.Fatalf("no args: %v", err)
	}
	if inv.Target() != "passthrough:///"+busy.addr {
		t.Fatalf("Target %q", inv.Target())
	}
}

// TestFireAndForgetInterceptor: generated client code, unchanged, gets
// failback for the chosen method; other methods fail as usual.
func TestFireAndForgetInterceptor(t *testing.T) {
	env := newNacosEnv(t)
	fl, calls := startFlaky(t, 2, codes.Unavailable, nil)
	env.register(t, fl)
	ff := reboundgrpc.NewFireAndForget(checkMethod)
	cc := dial(t, env.b, "rebound:///orders", grpc.WithChainUnaryInterceptor(ff.UnaryClientInterceptor()))
	h := newHookLog()
	fb, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true))),
		failback.WithPolicy(rebound.Policy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ff.Bind(fb)

	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// Not chosen: List fails like any call (the backend's first two calls fail).
	if _, err := client.List(ctx, &healthpb.HealthListRequest{}, grpc.WaitForReady(true)); status.Code(err) != codes.Unavailable {
		t.Fatalf("List: %v, want the backend's Unavailable", err)
	}
	// Chosen: Check's failure is queued (nil error) and retried.
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check through the interceptor: %v, want queued (nil)", err)
	}
	select {
	case task := <-h.succeeded:
		if task.Attempts != 2 {
			t.Fatalf("succeeded after %d attempts, want 2", task.Attempts)
		}
	case task := <-h.gaveUp:
		t.Fatalf("gave up: %v", task.Err)
	case <-time.After(testTimeout):
		t.Fatal("no retry succeeded")
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls at the backend, want 3 (List, Check, its retry)", calls.Load())
	}
}
