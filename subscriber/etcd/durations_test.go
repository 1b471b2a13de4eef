package etcd_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Every duration option of the package with 0, 1 ns, a negative value and
// math.MaxInt64: refused with an error naming the option and the rule, or
// accepted with a sane meaning (a lease etcd grants as asked, an attempt
// bounded by its ctx).
func TestDurationOptionsSweep(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	for _, tc := range []struct {
		name string
		opt  func(time.Duration) etcdreg.Option
		ok   map[time.Duration]bool // values accepted
	}{
		{"WithAttemptTimeout", func(d time.Duration) etcdreg.Option { return etcdreg.WithAttemptTimeout(d) },
			map[time.Duration]bool{1: true, math.MaxInt64: true}},
		{"WithTTL", func(d time.Duration) etcdreg.Option { return etcdreg.WithTTL(d) }, nil},
	} {
		for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
			t.Run(tc.name+"/"+d.String(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.9", 80), tc.opt(d))
				if !tc.ok[d] {
					var ae *rebound.ArgumentError
					if g != nil {
						resp, _ := cli.TimeToLive(ctx, g.Lease())
						_ = g.Shutdown(ctx)
						t.Fatalf("%s(%d) accepted: lease granted with a TTL of %d s; want an ArgumentError", tc.name, d, resp.GrantedTTL)
					}
					if !errors.As(err, &ae) || ae.Func != "etcd."+tc.name || !strings.Contains(ae.Reason, "must") {
						t.Fatalf("%s(%d) = %v; want an ArgumentError of etcd.%s stating the rule", tc.name, d, err, tc.name)
					}
					return
				}
				if d == 1 {
					// 1 ns is accepted (d > 0) and bounds every request:
					// the grant cannot complete.
					if err == nil {
						_ = g.Shutdown(ctx)
						t.Fatalf("%s(1ns): Register succeeded; want the attempt's deadline", tc.name)
					}
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("%s(1ns) = %v; want the attempt's deadline", tc.name, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s(%d) = %v; want it accepted", tc.name, d, err)
				}
				if err := g.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The largest TTL etcd grants (lease.MaxLeaseTTL, 9e9 s) is accepted and
// granted as asked; one second more is refused.
func TestTTLBoundIsEtcds(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.9", 80), etcdreg.WithTTL(maxTTL))
	if err != nil {
		t.Fatalf("WithTTL(MaxTTL): %v", err)
	}
	resp, err := cli.TimeToLive(ctx, g.Lease())
	if err != nil || resp.GrantedTTL != int64(maxTTL/time.Second) {
		t.Errorf("lease granted with %v, %v; want %d s", resp, err, int64(maxTTL/time.Second))
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var ae *rebound.ArgumentError
	if _, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.9", 80), etcdreg.WithTTL(maxTTL+1)); !errors.As(err, &ae) || ae.Func != "etcd.WithTTL" {
		t.Errorf("WithTTL(MaxTTL+1ns) = %v; want an ArgumentError of etcd.WithTTL", err)
	}
}

// maxTTL is etcd's largest lease TTL (lease.MaxLeaseTTL, 9e9 s).
const maxTTL = 9_000_000_000 * time.Second
