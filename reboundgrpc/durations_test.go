package reboundgrpc_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundgrpc"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// Every duration option of package reboundgrpc (WithLinger,
// WithResolveNowInterval, WithUnresolvedReport) with 0, 1 ns, a negative
// value and math.MaxInt64: refused by NewBuilder with an error naming the
// option and the rule, or accepted, and then a resolver built while the
// registry fails gets the list once it answers, with a bounded number of
// registry requests and error reports through ResolveNow storms (no busy
// loop), and none before WithUnresolvedReport's d.
func TestDurationOptionsSweep(t *testing.T) {
	for _, tc := range []struct {
		fn  string
		opt func(time.Duration) reboundgrpc.Option
		ok  func(time.Duration) bool
	}{
		{"WithLinger", reboundgrpc.WithLinger, func(d time.Duration) bool { return d >= 0 }},
		{"WithResolveNowInterval", reboundgrpc.WithResolveNowInterval, func(d time.Duration) bool { return d > 0 }},
		{"WithUnresolvedReport", reboundgrpc.WithUnresolvedReport, func(d time.Duration) bool { return d >= 0 }},
	} {
		for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
			t.Run(tc.fn+"/"+d.String(), func(t *testing.T) {
				m, err := subscriber.New(subscribertest.New())
				if err != nil {
					t.Fatal(err)
				}
				b, err := reboundgrpc.NewBuilder(m, tc.opt(d))
				if b != nil {
					_ = b.Close()
				}
				_ = m.Close()
				if !tc.ok(d) {
					var ae *rebound.ArgumentError
					if !errors.As(err, &ae) || ae.Func != "reboundgrpc."+tc.fn || !strings.Contains(ae.Reason, "must") {
						t.Fatalf("%s(%d): NewBuilder = %v; want an ArgumentError of reboundgrpc.%s stating the rule", tc.fn, d, err, tc.fn)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s(%d): NewBuilder = %v; want it accepted", tc.fn, d, err)
				}
				sweepResolver(t, tc.fn, d, tc.opt(d))
			})
		}
	}
}

func sweepResolver(t *testing.T, fn string, d time.Duration, opt reboundgrpc.Option) {
	synctest.Test(t, func(t *testing.T) {
		reg, b := memEnv(t, opt)
		down := errors.New("registry down")
		reg.SetFailure(func(subscriber.Key) error { return down })
		f := newFakeCC()
		r, err := b.Build(mustTarget(t, "rebound:///orders"), f, resolver.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(50 * time.Millisecond)
		}
		reg.SetFailure(nil)
		reg.Set(orders, inst(1))
		for range 100 {
			r.ResolveNow(resolver.ResolveNowOptions{})
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		r.Close()
		time.Sleep(time.Minute)
		synctest.Wait()
		states, errs := f.snapshot()
		if !slices.Contains(states, 1) {
			t.Errorf("%s(%v): states %v; want the list once the registry answers", fn, d, states)
		}
		if s := reg.Stats(); s.Subscribes+s.Lookups > 40 || len(errs) > 20 {
			t.Errorf("%s(%v): %d registry requests, %d error reports in 15 s; want a paced few", fn, d, s.Subscribes+s.Lookups, len(errs))
		}
		if fn == "WithUnresolvedReport" && (d == 0 || d == math.MaxInt64) && len(errs) != 0 {
			t.Errorf("%s(%v): %d error reports; want none", fn, d, len(errs))
		}
	})
}

// reboundgrpc.Drain's wait with 0, 1 ns, a negative value and
// math.MaxInt64: a negative wait is refused before anything is stopped;
// the others stop the server, a wait longer than ctx ending with ctx.
func TestDrainWaitSweep(t *testing.T) {
	for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
		t.Run(d.String(), func(t *testing.T) {
			srv := grpc.NewServer()
			defer srv.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := reboundgrpc.Drain(ctx, srv, d)
			var ae *rebound.ArgumentError
			switch {
			case d < 0:
				if !errors.As(err, &ae) || ae.Arg != "wait" || !strings.Contains(ae.Reason, "must") {
					t.Fatalf("Drain(wait %v) = %v; want an ArgumentError naming wait", d, err)
				}
			case d == math.MaxInt64:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Drain(wait %v) = %v; want ctx's error", d, err)
				}
			case err != nil:
				t.Fatalf("Drain(wait %v) = %v", d, err)
			}
		})
	}
}
