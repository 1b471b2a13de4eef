package reboundgrpc

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/rebound-go/rebound/cluster"
)

// Queue takes a call and either makes it or keeps it for later, as a
// *failback.Invoker does: (nil, nil) for a call queued for retry.
type Queue interface {
	Invoke(ctx context.Context, inv *cluster.Invocation) (any, error)
}

// FireAndForget routes the unary calls of chosen methods through a Queue
// (a failback.Invoker over NewInvoker(cc)), so that generated client code
// gets failback without changing its calls:
//
//	ff := reboundgrpc.NewFireAndForget("/audit.Audit/Record")
//	cc, _ := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(ff.UnaryClientInterceptor()), ...)
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	ff.Bind(fb)
//	_, err := auditpb.NewAuditClient(cc).Record(ctx, req) // nil when queued
//
// For a chosen method the interceptor makes the call through the Queue:
// its first attempt runs at once in the caller's goroutine, through the
// rest of the interceptor chain; if it fails with a transient status the
// Queue keeps it and the caller gets a nil error. The caller's reply
// message is left untouched (fire-and-forget: there is no answer to wait
// for) and the caller's call options are not used (set the Invoker's with
// WithCallOptions). The request is cloned (proto.Clone), so the caller may
// reuse it. Calls the Queue makes come back through the interceptor and go
// straight on. Until Bind, and for other methods, calls go straight on.
//
// A FireAndForget is safe for concurrent use.
type FireAndForget struct {
	methods map[string]bool
	q       atomic.Pointer[queueRef]
}

type queueRef struct{ q Queue }

// NewFireAndForget returns a FireAndForget for the given full method names
// ("/package.Service/Method").
func NewFireAndForget(methods ...string) *FireAndForget {
	f := &FireAndForget{methods: make(map[string]bool, len(methods))}
	for _, m := range methods {
		f.methods[m] = true
	}
	return f
}

// Bind sets the Queue the chosen methods go through (nil unbinds).
func (f *FireAndForget) Bind(q Queue) {
	if q == nil {
		f.q.Store(nil)
		return
	}
	f.q.Store(&queueRef{q})
}

// bypassKey marks the context of a call the Invoker makes.
type bypassKey struct{}

func bypassed(ctx context.Context) bool { return ctx.Value(bypassKey{}) != nil }

// UnaryClientInterceptor returns the interceptor (install it with
// grpc.WithChainUnaryInterceptor).
func (f *FireAndForget) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ref := f.q.Load()
		if ref == nil || !f.methods[method] || bypassed(ctx) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if m, ok := req.(proto.Message); ok {
			req = proto.Clone(m)
		}
		_, err := ref.q.Invoke(ctx, &cluster.Invocation{Method: method, Args: []any{req}})
		return err
	}
}
