package reboundgrpc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// PushbackTrailer is the trailer in which a gRPC server tells the client
// how many milliseconds to wait before retrying (gRFC A6).
const PushbackTrailer = "grpc-retry-pushback-ms"

// Invoker is a cluster.Invoker over a grpc.ClientConn: each Invoke is one
// unary RPC through the ClientConn's balancer, so a failback.Invoker over
// it retries fire-and-forget calls in the background on whichever backend
// the balancer picks at that time:
//
//	cc, _ := grpc.NewClient("rebound:///orders", grpc.WithResolvers(b), ...)
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	_, err := fb.Invoke(ctx, &cluster.Invocation{
//		Method: "/orders.Orders/Notify",
//		Args:   []any{req}, // the request; optionally the reply as Args[1]
//	})
//
// Invocation.Method is the full method name ("/package.Service/Method");
// Args[0] is the request message, Args[1] (optional) the reply message,
// which Invoke returns; without it the reply is decoded into an
// emptypb.Empty (its fields kept as unknown fields) and Invoke returns that.
// Attachments are sent as outgoing metadata, added to the context's.
//
// Errors are classified by Classify, so failback's DefaultRetryable retries
// exactly the transient ones and waits at least a server's pushback.
// Invoker is safe for concurrent use; it does not own the ClientConn.
type Invoker struct {
	cc       grpc.ClientConnInterface
	target   string
	opts     []grpc.CallOption
	classify func(error, metadata.MD) error
}

// InvokerOption configures NewInvoker.
type InvokerOption interface {
	applyInvoker(*Invoker)
}

type invokerOptionFunc func(*Invoker)

func (f invokerOptionFunc) applyInvoker(i *Invoker) { f(i) }

// WithCallOptions adds call options to every RPC of the Invoker (for
// example grpc.WaitForReady(true)).
func WithCallOptions(opts ...grpc.CallOption) InvokerOption {
	return invokerOptionFunc(func(i *Invoker) { i.opts = append(i.opts, opts...) })
}

// WithTarget sets the Invoker's Target (default: the ClientConn's
// CanonicalTarget when it is a *grpc.ClientConn, else "grpc").
func WithTarget(t string) InvokerOption {
	return invokerOptionFunc(func(i *Invoker) { i.target = t })
}

// WithClassifier replaces Classify for this Invoker. fn gets the RPC's error
// and trailer and returns the error Invoke returns (marked with
// rebound.Transient, rebound.Permanent or rebound.RetryAfter as it sees
// fit).
func WithClassifier(fn func(err error, trailer metadata.MD) error) InvokerOption {
	return invokerOptionFunc(func(i *Invoker) {
		if fn != nil {
			i.classify = fn
		}
	})
}

// NewInvoker returns an Invoker over cc (a *grpc.ClientConn, or anything
// with its Invoke method). It panics on a nil cc, like grpc's generated
// clients would on the first call.
func NewInvoker(cc grpc.ClientConnInterface, opts ...InvokerOption) *Invoker {
	if cc == nil {
		panic("reboundgrpc.NewInvoker: cc is nil")
	}
	i := &Invoker{cc: cc, target: "grpc", classify: Classify}
	if c, ok := cc.(*grpc.ClientConn); ok {
		i.target = c.CanonicalTarget()
	}
	for _, o := range opts {
		if o != nil {
			o.applyInvoker(i)
		}
	}
	return i
}

// Target implements cluster.Invoker.
func (i *Invoker) Target() string { return i.target }

// Invoke implements cluster.Invoker: one unary RPC. An Invocation it
// cannot send (nil, no Method, or Args other than [request] or [request,
// reply] with a non-nil request) is a Permanent *rebound.ArgumentError
// (matching rebound.ErrInvalidArgument), never retried.
func (i *Invoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	if inv == nil || inv.Method == "" || len(inv.Args) < 1 || len(inv.Args) > 2 || inv.Args[0] == nil {
		return nil, rebound.Permanent(&rebound.ArgumentError{Func: "reboundgrpc.Invoker.Invoke", Arg: "inv",
			Reason: fmt.Sprintf("must have a Method and Args [request] or [request, reply] (method %q)", methodOf(inv))})
	}
	var reply any = &emptypb.Empty{}
	if len(inv.Args) == 2 && inv.Args[1] != nil {
		reply = inv.Args[1]
	}
	if len(inv.Attachments) > 0 {
		kv := make([]string, 0, 2*len(inv.Attachments))
		for k, v := range inv.Attachments {
			kv = append(kv, k, v)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	ctx = context.WithValue(ctx, bypassKey{}, true) // a FireAndForget interceptor lets it through
	var trailer metadata.MD
	opts := append(i.opts[:len(i.opts):len(i.opts)], grpc.Trailer(&trailer))
	if err := i.cc.Invoke(ctx, inv.Method, inv.Args[0], reply, opts...); err != nil {
		return nil, i.classify(err, trailer)
	}
	return reply, nil
}

func methodOf(inv *cluster.Invocation) string {
	if inv == nil {
		return ""
	}
	return inv.Method
}

// Classify marks a gRPC error for rebound's retry loops (failback's
// DefaultRetryable and rebound.Retry):
//
//   - transient (rebound.Transient): Unavailable, Aborted, and
//     DeadlineExceeded (the attempt's deadline: failback never queues a call
//     whose caller's context is done);
//   - ResourceExhausted with a valid grpc-retry-pushback-ms trailer:
//     transient, wrapped in rebound.RetryAfter with that delay; with a
//     negative or malformed pushback (the server says "do not retry") or
//     none: permanent (it is also what a client-side message-size limit
//     returns);
//   - permanent (rebound.Permanent): InvalidArgument, NotFound,
//     AlreadyExists, PermissionDenied, Unauthenticated, FailedPrecondition,
//     OutOfRange, Unimplemented, Internal, DataLoss, Unknown, Canceled;
//   - an error that is not a gRPC status (a context error, for example) is
//     returned unmarked.
//
// The returned error wraps err: status.FromError and status.Code still see
// the gRPC status.
func Classify(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded:
		return rebound.Transient(err)
	case codes.ResourceExhausted:
		if d, ok := Pushback(trailer); ok {
			return rebound.RetryAfter(d, rebound.Transient(err))
		}
		return rebound.Permanent(err)
	case codes.OK:
		return err
	}
	return rebound.Permanent(err)
}

// Pushback returns the delay of a grpc-retry-pushback-ms trailer. It reports
// false when there is none, or when it is negative or malformed (which
// gRFC A6 reads as "do not retry").
func Pushback(trailer metadata.MD) (time.Duration, bool) {
	vals := trailer.Get(PushbackTrailer)
	if len(vals) != 1 {
		return 0, false
	}
	ms, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil || ms < 0 || ms > int64(24*time.Hour/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// Retryable reports whether Classify marks err transient: use it with
// failback.WithRetryable for errors that did not come through an Invoker.
func Retryable(err error) bool {
	if err == nil || rebound.IsPermanent(err) {
		return false
	}
	if rebound.IsTransient(err) {
		return true
	}
	return rebound.IsTransient(Classify(err, nil))
}
