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
	"github.com/rebound-go/rebound/internal/telemetry"
)

// pushbackTrailer is the trailer in which a gRPC server tells the client
// how many milliseconds to wait before retrying (gRFC A6).
const pushbackTrailer = "grpc-retry-pushback-ms"

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
// Method is the full method name; Args are [request] or [request, reply];
// Attachments go as outgoing metadata. Errors go through Classify. It is
// safe for concurrent use and does not own the ClientConn.
type Invoker struct {
	cc     grpc.ClientConnInterface
	target string
	opts   []grpc.CallOption
}

// NewInvoker returns an Invoker over cc that adds opts to every RPC. Its
// Target is cc's CanonicalTarget, or "grpc". It panics on a nil cc.
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
// cannot send is a Permanent *rebound.ArgumentError. An error of an attempt
// ctx ended wraps ctx.Err(); a call failed by the ClientConn closing is
// marked failback.Stopping.
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
			if k == telemetry.TraceAttachment { // the trace travels in ctx (grpc's OpenTelemetry plugin), not as metadata
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

// Classify marks a gRPC error transient (Unavailable, Aborted,
// DeadlineExceeded, ResourceExhausted with pushback) or permanent (the
// other codes); an error that is not a status comes back unmarked. A
// grpc-retry-pushback-ms trailer becomes a rebound.RetryAfter, or makes the
// error permanent when negative or malformed. The result wraps err; the
// full table is in docs/grpc.md.
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

// maxPushbackMs is the largest pushback a time.Duration holds.
const maxPushbackMs = int64(math.MaxInt64 / int64(time.Millisecond))

// pushback parses the trailer: present is false without one; retry is
// false for a negative or malformed one.
func pushback(trailer metadata.MD) (d time.Duration, present, retry bool) {
	vals := trailer.Get(pushbackTrailer)
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
