package reboundgrpc

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
)

// FireAndForget is a unary client interceptor that sends the calls of
// chosen methods through a failback Invoker, so generated client code gets
// failback unchanged:
//
//	ff := reboundgrpc.NewFireAndForget("/audit.Audit/Record")
//	cc, _ := grpc.NewClient(target, grpc.WithChainUnaryInterceptor(ff.UnaryClientInterceptor()), ...)
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	ff.Bind(fb)
//	_, err := auditpb.NewAuditClient(cc).Record(ctx, req) // nil when queued
//
// The first attempt continues the caller's interceptor chain; retries are
// calls of their own through the whole chain (docs/grpc.md). The caller's
// reply is left untouched. Until Bind, and for other methods, calls go
// straight on. It is safe for concurrent use.
type FireAndForget struct {
	methods map[string]bool
	q       atomic.Pointer[failback.Invoker]
}

// NewFireAndForget returns a FireAndForget for the given full method names
// ("/package.Service/Method").
func NewFireAndForget(methods ...string) *FireAndForget {
	f := &FireAndForget{methods: make(map[string]bool, len(methods))}
	for _, m := range methods {
		f.methods[m] = true
	}
	return f
}

// Bind sets the failback Invoker the chosen methods go through (nil
// unbinds).
func (f *FireAndForget) Bind(q *failback.Invoker) { f.q.Store(q) }

// bypassKey marks the context of a call the Invoker makes.
type bypassKey struct{}

func bypassed(ctx context.Context) bool { return ctx.Value(bypassKey{}) != nil }

// contKey carries the rest of the interceptor chain to the first attempt.
type contKey struct{}

// continuation is the rest of a FireAndForget call's interceptor chain,
// used once, by the first attempt an Invoker over the same ClientConn
// makes for the same method.
type continuation struct {
	mu      sync.Mutex // guards used
	used    bool       // taken by an attempt, or expired
	inUse   sync.Mutex // held by the attempt that took it, until it ends
	method  string
	req     any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption
}

// firstAttempt returns the continuation of ctx if it is for method on cc
// and was not used yet.
func firstAttempt(ctx context.Context, cc grpc.ClientConnInterface, method string) *continuation {
	c, _ := ctx.Value(contKey{}).(*continuation)
	if c == nil || c.method != method || c.cc == nil || grpc.ClientConnInterface(c.cc) != cc {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used {
		return nil
	}
	c.used = true
	c.inUse.Lock() // released by done
	return c
}

// done ends the use of c that firstAttempt granted.
func (c *continuation) done() { c.inUse.Unlock() }

// expire makes c unusable once the interceptor returns, and waits for an
// attempt that took it to end: after that the caller may reuse its
// message and read its call options' results.
func (c *continuation) expire() {
	c.mu.Lock()
	c.used = true
	c.mu.Unlock()
	c.inUse.Lock()
	//lint:ignore SA2001 a wait for the attempt holding it, not a critical section
	c.inUse.Unlock()
}

// UnaryClientInterceptor returns the interceptor (install it with
// grpc.WithChainUnaryInterceptor).
func (f *FireAndForget) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ref := f.q.Load()
		if ref == nil || !f.methods[method] || bypassed(ctx) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		arg := req
		if m, ok := req.(proto.Message); ok {
			w, err := wrap(m)
			if err != nil {
				return status.Errorf(codes.Internal, "reboundgrpc: encoding the request of %s: %v", method, err)
			}
			arg = w
		}
		c := &continuation{method: method, req: req, cc: cc, invoker: invoker, opts: opts}
		// The continuation is valid only until the interceptor returns: a
		// retry whose context keeps the caller's values
		// (failback.WithContextValues) after a first attempt that never
		// reached the Invoker (the directory listed nothing) must not
		// continue a chain that has returned, with the caller's message
		// (which it may reuse) and call options.
		defer c.expire()
		ctx = context.WithValue(ctx, contKey{}, c)
		_, err := ref.Invoke(ctx, &cluster.Invocation{Method: method, Args: []any{arg}})
		return err
	}
}

// wrappedPrefix starts the type URL of a request wrapped by wrap: an Any
// with it is a FireAndForget request, not a request of type Any.
const wrappedPrefix = "reboundgrpc.request/"

// wrap returns m's wire form in an Any with a wrappedPrefix type URL. Any
// failback Codec stores it: protocodec as an Any, JSONCodec as
// {"type_url": ..., "value": base64}, both decoded again by request.
func wrap(m proto.Message) (*anypb.Any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: wrappedPrefix + string(m.ProtoReflect().Descriptor().FullName()), Value: b}, nil
}

// request returns the message to send for a: a wrapped request (an Any
// from wrap, or its JSON-decoded form after a restart) unwrapped, any
// other value as it is (a map too: a custom gRPC codec may send one).
func request(method string, a any) (any, error) {
	var typeURL string
	var value []byte
	switch v := a.(type) {
	case *anypb.Any:
		if !strings.HasPrefix(v.GetTypeUrl(), wrappedPrefix) {
			return a, nil
		}
		typeURL, value = v.TypeUrl, v.Value
	case map[string]any:
		u, _ := v["type_url"].(string)
		if !strings.HasPrefix(u, wrappedPrefix) {
			return a, nil
		}
		typeURL = u
		if s, ok := v["value"].(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, wrappedError(method, typeURL, err)
			}
			value = b
		}
	default:
		return a, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(strings.TrimPrefix(typeURL, wrappedPrefix)))
	if err != nil {
		return nil, wrappedError(method, typeURL, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(value, m); err != nil {
		return nil, wrappedError(method, typeURL, err)
	}
	return m, nil
}

func wrappedError(method, typeURL string, err error) error {
	return &rebound.ArgumentError{Func: "reboundgrpc.Invoker.Invoke", Arg: "inv.Args[0]",
		Reason: fmt.Sprintf("is a queued request of %s (%s) that cannot be decoded", method, strings.TrimPrefix(typeURL, wrappedPrefix)), Err: err}
}

func notMessage(method, what string, a any) error {
	return &rebound.ArgumentError{Func: "reboundgrpc.Invoker.Invoke", Arg: "inv.Args",
		Reason: fmt.Sprintf("has a %s of %s that is a %T, not a proto.Message: it was stored by a failback Codec that cannot "+
			"give protocol buffers messages back (failback's default JSONCodec); use failback.WithStore(s, protocodec.New(nil)), "+
			"or FireAndForget, whose requests every Codec keeps", what, method, a)}
}
