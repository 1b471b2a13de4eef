package reboundgrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// An Invocation the Invoker cannot send is a Permanent argument error,
// not a bare error that matches nothing.
func TestInvokerBadInvocation(t *testing.T) {
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	inv := reboundgrpc.NewInvoker(cc)
	for _, bad := range []*cluster.Invocation{nil, {Method: "/a/b"}, {Args: []any{&struct{}{}}}, {Method: "/a/b", Args: []any{nil}}} {
		_, err := inv.Invoke(context.Background(), bad)
		if !errors.Is(err, rebound.ErrInvalidArgument) || !rebound.IsPermanent(err) ||
			!strings.Contains(err.Error(), "reboundgrpc.Invoker.Invoke: inv must have a Method and Args") {
			t.Errorf("Invoke(%+v) = %v, want a Permanent *rebound.ArgumentError naming inv", bad, err)
		}
	}
}

// NewBuilder over a closed Manager used to succeed; its ClientConns then
// failed only at RPC time. Now it fails at construction (newuser item 9).
func TestNewBuilderClosedManager(t *testing.T) {
	reg := subscribertest.New()
	defer reg.Close()
	m, err := subscriber.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Closed() {
		t.Fatal("Closed() = true before Close")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !m.Closed() {
		t.Fatal("Closed() = false after Close")
	}
	b, err := reboundgrpc.NewBuilder(m)
	if b != nil {
		_ = b.Close()
	}
	if !errors.Is(err, rebound.ErrClosed) || !errors.Is(err, subscriber.ErrManagerClosed) ||
		!strings.Contains(err.Error(), "reboundgrpc.NewBuilder") {
		t.Fatalf("NewBuilder(closed Manager) = %v, want an error matching rebound.ErrClosed", err)
	}
}
