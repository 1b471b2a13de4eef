package reboundgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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
	if _, err := m.NewWatchGroup(0, 0); err != nil {
		t.Fatalf("NewWatchGroup before Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewWatchGroup(0, 0); !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("NewWatchGroup after Close: %v, want rebound.ErrClosed", err)
	}
	b, err := reboundgrpc.NewBuilder(m)
	if b != nil {
		_ = b.Close()
	}
	if !errors.Is(err, rebound.ErrClosed) ||
		!strings.Contains(err.Error(), "reboundgrpc.NewBuilder") {
		t.Fatalf("NewBuilder(closed Manager) = %v, want an error matching rebound.ErrClosed", err)
	}
}

// Providers registered disabled (or unhealthy) used to fail every RPC with
// "the registry lists 3, none passes the filter" at best, or "no children
// to pick from" with nothing logged: the resolver's error now names the
// reason, the RPC's error carries it with pick_first (round_robin says "no
// children to pick from" whatever the resolver reports), and the Builder
// logs it at Warn.
func TestFilteredOutSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name, lb string
		set      func(*subscriber.Instance)
		want     string
	}{
		{"disabled", "pick_first", func(in *subscriber.Instance) { in.Enabled = false }, "3 instances, all disabled"},
		{"unhealthy", "pick_first", func(in *subscriber.Instance) { in.Healthy = false }, "3 instances, all unhealthy"},
		{"disabled", "round_robin", func(in *subscriber.Instance) { in.Enabled = false }, "3 instances, all disabled"},
	} {
		t.Run(tc.name+"/"+tc.lb, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			reg, _, b := memEnvWith(t, nil, reboundgrpc.WithUnresolvedReport(0), reboundgrpc.WithLogger(zap.New(core)))
			var list []subscriber.Instance
			for range 3 {
				in := startBackend(t).instance()
				tc.set(&in)
				list = append(list, in)
			}
			reg.Set(subscriber.Key{Service: "orders"}, list...)
			cc := dial(t, b, "rebound:///orders", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+tc.lb+`":{}}]}`))
			// A second ClientConn reads the same list: one Warn line for both.
			cc2 := dial(t, b, "rebound:///orders", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"`+tc.lb+`":{}}]}`))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var err error
			for ctx.Err() == nil {
				if _, err = check(ctx, cc); err != nil && (tc.lb != "pick_first" || strings.Contains(err.Error(), "reboundgrpc")) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("RPC: %v; want Unavailable", err)
			}
			if tc.lb == "pick_first" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "orders")) {
				t.Fatalf("RPC: %v; want orders and %q named", err, tc.want)
			}
			if _, err := check(ctx, cc2); status.Code(err) != codes.Unavailable {
				t.Fatalf("RPC on the second ClientConn: %v; want Unavailable", err)
			}
			eventually(t, "both resolvers built", func() bool { return b.Stats().Resolvers == 2 })
			eventually(t, "a Warn line naming the reason", func() bool {
				for _, e := range logs.All() {
					if strings.Contains(fmt.Sprint(e.ContextMap()), tc.want) {
						return true
					}
				}
				return false
			})
			if n := logs.FilterMessageSnippet("filtered out").Len(); n != 1 {
				t.Errorf("%d Warn lines for one list read by two ClientConns, want 1: %v", n, logs.All())
			}
		})
	}
}
