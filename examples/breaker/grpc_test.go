package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	_ "google.golang.org/grpc/xds" // registers outlier_detection_experimental

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// healthBackend answers Check with SERVING, or with UNAVAILABLE while
// down, and counts the calls.
type healthBackend struct {
	healthpb.UnimplementedHealthServer
	down  atomic.Bool
	calls atomic.Int64
	last  atomic.Int64 // UnixNano of the last call
}

func (h *healthBackend) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	h.last.Store(time.Now().UnixNano())
	if h.down.Load() {
		return nil, status.Error(codes.Unavailable, "broken deploy")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// outlierConfig is the service config docs/breaker.md recommends, with a
// short interval so that the test ejects quickly.
const outlierConfig = `{"loadBalancingConfig":[{"outlier_detection_experimental":{
	"interval":"0.2s","baseEjectionTime":"30s","maxEjectionTime":"300s","maxEjectionPercent":50,
	"failurePercentageEjection":{"threshold":50,"enforcementPercentage":100,"minimumHosts":3,"requestVolume":10},
	"childPolicy":[{"round_robin":{}}]}}]}`

// TestGRPCOutlierDetectionWithFailback is the combination docs/breaker.md
// recommends for one ClientConn per service: reboundgrpc's resolver gives
// the list, grpc-go's outlier detection ejects the backend that answers
// UNAVAILABLE, failback retries what failed. Real sockets: bounded,
// generous deadlines; what is checked does not depend on speed.
func TestGRPCOutlierDetectionWithFailback(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"))
	backends := make([]*healthBackend, 3)
	var instances []subscriber.Instance
	for i := range backends {
		lis, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		backends[i] = &healthBackend{}
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, backends[i])
		go func() { _ = s.Serve(lis) }()
		defer s.Stop()
		instances = append(instances, subscribertest.Instance("127.0.0.1", uint64(lis.Addr().(*net.TCPAddr).Port)))
	}
	backends[1].down.Store(true)

	reg := subscribertest.New()
	defer reg.Close()
	reg.Set(subscriber.Key{Service: "orders"}, instances...)
	m, err := subscriber.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rb, err := reboundgrpc.NewBuilder(m)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	cc, err := grpc.NewClient("rebound:///orders", grpc.WithResolvers(rb),
		grpc.WithDefaultServiceConfig(outlierConfig),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	f, err := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inv := &cluster.Invocation{Method: healthpb.Health_Check_FullMethodName, Args: []any{&healthpb.HealthCheckRequest{}}}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil &&
		status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v", err)
	}

	// Call until a window of 200 calls has none on the broken backend:
	// it is ejected (bounded: 20 s).
	start := time.Now()
	ejected := time.Duration(-1)
	tick := time.NewTicker(5 * time.Millisecond) // 200 calls/s
	defer tick.Stop()
	window, before := 0, backends[1].calls.Load()
	for ejected < 0 && time.Since(start) < 20*time.Second {
		<-tick.C
		if _, err := f.Invoke(ctx, inv); err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		if window++; window == 200 {
			if n := backends[1].calls.Load(); n == before {
				ejected = time.Since(start)
			} else {
				window, before = 0, n
			}
		}
	}
	if ejected < 0 {
		t.Fatalf("the UNAVAILABLE backend was never ejected in 20 s (calls %d, %d, %d)",
			backends[0].calls.Load(), backends[1].calls.Load(), backends[2].calls.Load())
	}
	if err := f.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st := f.Stats()
	var dropped uint64
	for _, n := range st.Dropped {
		dropped += n
	}
	t.Logf("last call to the broken backend %v after the start (seen ejected after a 200-call window without it, at %v); calls per backend %d, %d (broken), %d; failback queued %d, succeeded %d",
		time.Unix(0, backends[1].last.Load()).Sub(start).Round(time.Millisecond), ejected.Round(time.Millisecond),
		backends[0].calls.Load(), backends[1].calls.Load(), backends[2].calls.Load(), st.Offered, st.Succeeded)
	if st.GaveUp != 0 || dropped != 0 || st.Succeeded != st.Offered {
		t.Errorf("failback lost calls: %+v", st)
	}
	if backends[0].calls.Load() == 0 || backends[2].calls.Load() == 0 {
		t.Errorf("a healthy backend got no call")
	}
}
