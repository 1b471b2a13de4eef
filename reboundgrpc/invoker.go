package reboundgrpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
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
// Attachments are sent as outgoing metadata, added to the context's
// (but failback.TraceContextKey, which failback keeps for its traces).
//
// Errors are classified by Classify, so failback's DefaultRetryable retries
// exactly the transient ones and waits at least a server's pushback.
// Invoker is safe for concurrent use; it does not own the ClientConn.
type Invoker struct {
	cc     grpc.ClientConnInterface
	target string
	opts   []grpc.CallOption
}

// NewInvoker returns an Invoker over cc (a *grpc.ClientConn, or anything
// with its Invoke method) that adds opts to every RPC (for example
// grpc.WaitForReady(true)). Its Target is cc's CanonicalTarget, or "grpc".
// It panics on a nil cc, as generated clients would on the first call.
func NewInvoker(cc grpc.ClientConnInterface, opts ...grpc.CallOption) *Invoker {
	if cc == nil {
		panic("reboundgrpc.NewInvoker: cc is nil")
	}
	i := &Invoker{cc: cc, target: "grpc", opts: opts}
	if c, ok := cc.(*grpc.ClientConn); ok {
		i.target = c.CanonicalTarget()
	}
	return i
}

// Target implements cluster.Invoker.
func (i *Invoker) Target() string { return i.target }

// Invoke implements cluster.Invoker: one unary RPC. An Invocation it
// cannot send (nil, no Method, or Args other than [request] or [request,
// reply] with a non-nil request) is a Permanent *rebound.ArgumentError
// (matching rebound.ErrInvalidArgument), never retried; so is a request
// that a failback Store's Codec could not give back as a proto.Message
// after a restart (a map from failback's default JSONCodec, which gRPC's
// proto codec cannot send; use failback.WithCodec(protocodec.New(nil)) for
// calls made with Invoke, see the package documentation), with a message
// that says so.
//
// An attempt ended by ctx returns an error that also wraps ctx.Err()
// (errors.Is(err, context.Canceled) holds), so that a failback Invoker
// that cancels its in-flight retries when it closes keeps them queued.
//
// A call that fails with Canceled because the ClientConn is closed (its
// state is Shutdown, or grpc.ErrClientConnClosing) while ctx is not done
// is marked failback.Stopping: a failback Invoker does not retry it in
// this process and never gives it up; with a Store it stays stored for
// the next process.
func (i *Invoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	if inv == nil || inv.Method == "" || len(inv.Args) < 1 || len(inv.Args) > 2 || inv.Args[0] == nil {
		return nil, rebound.Permanent(&rebound.ArgumentError{Func: "reboundgrpc.Invoker.Invoke", Arg: "inv",
			Reason: fmt.Sprintf("must have a Method and Args [request] or [request, reply] (method %q)", methodOf(inv))})
	}
	c := firstAttempt(ctx, i.cc, inv.Method)
	if c != nil {
		defer c.done()
	}
	var req any
	var err error
	if c == nil {
		if req, err = request(inv.Method, inv.Args[0]); err != nil {
			return nil, rebound.Permanent(err)
		}
	}
	var reply any = &emptypb.Empty{}
	if len(inv.Args) == 2 && inv.Args[1] != nil {
		reply = inv.Args[1]
	}
	if len(inv.Attachments) > 0 {
		kv := make([]string, 0, 2*len(inv.Attachments))
		for k, v := range inv.Attachments {
			if k == failback.TraceContextKey { // the trace travels in ctx (grpc's OpenTelemetry plugin), not as metadata
				continue
			}
			kv = append(kv, k, v)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	var trailer metadata.MD
	opts := append(i.opts[:len(i.opts):len(i.opts)], grpc.Trailer(&trailer))
	if c != nil {
		// The first attempt of a FireAndForget call: the rest of the
		// interceptor chain it came from, with the caller's call options.
		err = c.invoker(ctx, inv.Method, c.req, reply, c.cc, append(c.opts[:len(c.opts):len(c.opts)], opts...)...)
	} else {
		ctx = context.WithValue(ctx, bypassKey{}, true) // a FireAndForget interceptor lets it through
		err = i.cc.Invoke(ctx, inv.Method, req, reply, opts...)
	}
	if err != nil {
		if ctx.Err() == nil && i.closing(err) {
			return nil, failback.Stopping(fmt.Errorf("reboundgrpc: %s: the ClientConn is closed; the call stays queued: %w", inv.Method, err))
		}
		if status.Code(err) == codes.Internal && c == nil {
			// A map the proto codec could not encode (a request or
			// reply a JSON Codec gave back after a restart); a custom
			// codec (grpc.ForceCodecV2) may send maps, so only its
			// failure is explained.
			if _, ok := req.(map[string]any); ok {
				return nil, rebound.Permanent(fmt.Errorf("%w: %w", notMessage(inv.Method, "request", req), err))
			}
			if _, ok := reply.(map[string]any); ok {
				return nil, rebound.Permanent(fmt.Errorf("%w: %w", notMessage(inv.Method, "reply", reply), err))
			}
		}
		if cerr := ctx.Err(); cerr != nil && status.Code(err) == status.FromContextError(cerr).Code() {
			// The attempt's context ended it: say so in a way errors.Is
			// sees (grpc-go's status does not wrap the context's error),
			// so that a failback Invoker closing during the attempt keeps
			// the call (dropped with ErrClosed, left in its Store) instead of giving
			// it up as Canceled.
			return nil, fmt.Errorf("%w (%w)", Classify(err, trailer), cerr)
		}
		return nil, Classify(err, trailer)
	}
	return reply, nil
}

// closing reports whether err is a Canceled status caused by the
// ClientConn closing.
func (i *Invoker) closing(err error) bool {
	if status.Code(err) != codes.Canceled {
		return false
	}
	//lint:ignore SA1019 grpc-go returns exactly this status for a closed ClientConn; nothing else tells it from a server's Canceled
	if errors.Is(err, grpc.ErrClientConnClosing) {
		return true
	}
	c, ok := i.cc.(*grpc.ClientConn)
	return ok && c.GetState() == connectivity.Shutdown
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
//     whose caller's context is done); Canceled caused by the ClientConn
//     closing (grpc.ErrClientConnClosing);
//   - ResourceExhausted: transient with a grpc-retry-pushback-ms trailer,
//     permanent without one (it is also what a client-side message-size
//     limit returns);
//   - a grpc-retry-pushback-ms trailer on any of these retryable codes
//     (gRFC A6): a valid one wraps the transient error in rebound.RetryAfter
//     with that delay (a retry loop caps it at its Policy.MaxRetryAfter,
//     5 min by default, so a pushback of days waits the cap); a negative or
//     malformed one (the server says "do not retry") makes it permanent;
//   - permanent (rebound.Permanent): InvalidArgument, NotFound,
//     AlreadyExists, PermissionDenied, Unauthenticated, FailedPrecondition,
//     OutOfRange, Unimplemented, Internal, DataLoss, Unknown, and Canceled
//     (other than the ClientConn closing);
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
	case codes.OK:
		return err
	case codes.Canceled:
		//lint:ignore SA1019 grpc-go returns exactly this status for a closed ClientConn; nothing else tells it from a server's Canceled
		if errors.Is(err, grpc.ErrClientConnClosing) {
			return rebound.Transient(err)
		}
		return rebound.Permanent(err)
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted:
		d, present, retry := pushback(trailer)
		switch {
		case present && !retry:
			return rebound.Permanent(err)
		case present:
			return rebound.RetryAfter(d, rebound.Transient(err))
		case st.Code() == codes.ResourceExhausted:
			return rebound.Permanent(err)
		}
		return rebound.Transient(err)
	}
	return rebound.Permanent(err)
}

// Pushback returns the delay of a grpc-retry-pushback-ms trailer. It reports
// false when there is none, or when it is negative or malformed (which
// gRFC A6 reads as "do not retry"; more than one value is malformed). A
// delay too large for a time.Duration saturates; a retry loop caps it at
// its Policy.MaxRetryAfter.
func Pushback(trailer metadata.MD) (time.Duration, bool) {
	d, present, retry := pushback(trailer)
	return d, present && retry
}

// maxPushbackMs is the largest pushback a time.Duration holds.
const maxPushbackMs = int64(math.MaxInt64 / int64(time.Millisecond))

// pushback parses the trailer: present is false without one; retry is
// false for a negative or malformed one.
func pushback(trailer metadata.MD) (d time.Duration, present, retry bool) {
	vals := trailer.Get(PushbackTrailer)
	if len(vals) == 0 {
		return 0, false, false
	}
	if len(vals) > 1 {
		return 0, true, false
	}
	ms, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange && ms > 0 {
			ms = maxPushbackMs // a valid, huge number: saturate
		} else {
			return 0, true, false
		}
	}
	if ms < 0 {
		return 0, true, false
	}
	return time.Duration(min(ms, maxPushbackMs)) * time.Millisecond, true, true
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
