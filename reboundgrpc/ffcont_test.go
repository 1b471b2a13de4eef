package reboundgrpc_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
)

// gateDir lists nothing on its first List (the call is queued without an
// attempt), then, once open is closed, the invoker.
type gateDir struct {
	inv   cluster.Invoker
	lists atomic.Int64
	open  chan struct{}
}

func (d *gateDir) List(ctx context.Context, _ *cluster.Invocation) ([]cluster.Invoker, error) {
	if d.lists.Add(1) == 1 {
		return nil, cluster.ErrNoInvokers
	}
	select {
	case <-d.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []cluster.Invoker{d.inv}, nil
}

// TestFireAndForgetRetryWithoutFirstAttempt: a FireAndForget call whose
// first attempt never reached the Invoker (the directory listed nothing)
// is retried later, with failback.WithContextValues, as a call of its
// own: through the whole interceptor chain, with the request as it was
// when the caller made the call (not the caller's message, which it may
// reuse at once), and without the caller's call options.
func TestFireAndForgetRetryWithoutFirstAttempt(t *testing.T) {
	rec := startRecorder(t)
	var n atomic.Int64
	outer := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", strconv.FormatInt(n.Add(1), 10))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ff := reboundgrpc.NewFireAndForget(checkMethod)
	cc := newCC(t, rec, grpc.WithChainUnaryInterceptor(outer, ff.UnaryClientInterceptor()))
	dir := &gateDir{inv: reboundgrpc.NewInvoker(cc, grpc.WaitForReady(true)), open: make(chan struct{})}
	h := newHookLog()
	fb, err := failback.New(dir, failback.WithContextValues(),
		failback.WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithObserver(h.hooks())))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ff.Bind(fb)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	req := &healthpb.HealthCheckRequest{Service: "b"}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, req); err != nil {
		t.Fatalf("Check: %v, want queued (nil)", err)
	}
	req.Service = "reused" // the caller reuses its message once the call returned
	close(dir.open)
	select {
	case <-h.succeeded:
	case task := <-h.gaveUp:
		t.Fatalf("gave up: %v", task.Err)
	case <-ctx.Done():
		t.Fatal("no retry succeeded")
	}
	if got := rec.served(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("served %v, want [b]: the retry sent the caller's message as it is now", got)
	}
	ids := rec.requestIDs()
	if len(ids) != 1 || !slices.Contains(ids[0], "2") {
		t.Errorf("x-request-id %v, want one call carrying id 2: the retry skipped the interceptors before the FireAndForget", ids)
	}
}
