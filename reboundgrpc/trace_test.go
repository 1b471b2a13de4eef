package reboundgrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/reboundgrpc"
)

// TestInvokerKeepsTraceContextOutOfMetadata: failback's traceparent
// attachment is its own (the trace itself travels in ctx, where grpc's
// OpenTelemetry plugin finds it); the other attachments are metadata.
func TestInvokerKeepsTraceContextOutOfMetadata(t *testing.T) {
	var md metadata.MD
	spy := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
		md, _ = metadata.FromOutgoingContext(ctx)
		return nil // nothing sent
	}
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(spy))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = reboundgrpc.NewInvoker(cc).Invoke(t.Context(), &cluster.Invocation{Method: checkMethod, Args: []any{struct{}{}},
		Attachments: map[string]string{"x-k": "v", telemetry.TraceAttachment: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Get(telemetry.TraceAttachment)) != 0 || md.Get("x-k")[0] != "v" {
		t.Fatalf("metadata %v: want x-k and no %s", md, telemetry.TraceAttachment)
	}
}
