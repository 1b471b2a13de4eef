package failback

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// Every duration setting of package failback (WithAttemptTimeout, WithTTL,
// WithCallTTL) with 0, 1 ns, a negative value and math.MaxInt64: refused
// by New with an error naming the option and the rule, or accepted, and
// then a call to a provider that keeps failing is retried at most as the
// policy allows, never two attempts less than minDelay apart, and
// has ended (given up or dropped) two hours later.
func TestDurationOptionsSweep(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(time.Duration) Option
		ctx  func(time.Duration) context.Context
		ok   func(time.Duration) bool
	}{
		{name: "WithAttemptTimeout", opt: func(d time.Duration) Option { return WithAttemptTimeout(d) }, ok: func(d time.Duration) bool { return d >= 0 }},
		{name: "WithTTL", opt: func(d time.Duration) Option { return WithTTL(d) }, ok: func(d time.Duration) bool { return d >= 0 }},
	} {
		for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
			t.Run(tc.name+"/"+d.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := newProvider("a:1", alwaysFail(errRefused))
					var opts []Option
					if tc.opt != nil {
						opts = append(opts, tc.opt(d))
					}
					f, err := New(cluster.NewStaticDirectory(p), opts...)
					if !tc.ok(d) {
						var ae *rebound.ArgumentError
						if f != nil || !errors.As(err, &ae) || ae.Func != "failback."+tc.name || !strings.Contains(ae.Reason, "must") {
							t.Fatalf("%s(%d): New = %v; want an ArgumentError of failback.%s stating the rule", tc.name, d, err, tc.name)
						}
						return
					}
					if err != nil {
						t.Fatalf("%s(%d): New = %v; want it accepted", tc.name, d, err)
					}
					defer mustClose(t, f)
					ctx := callerCtx()
					if tc.ctx != nil {
						ctx = tc.ctx(d)
					}
					if _, err := f.Invoke(ctx, &cluster.Invocation{Method: "m"}); err != nil {
						// A TTL shorter than any retry's wait: the caller
						// hears that the call was not queued.
						if d != 1 || !strings.Contains(err.Error(), "expired") || len(p.snapshot()) != 1 {
							t.Fatalf("Invoke = %v; want the call queued", err)
						}
						return
					}
					time.Sleep(2 * time.Hour)
					synctest.Wait()
					calls := p.snapshot()
					if len(calls) > 4 {
						t.Fatalf("%d attempts; want at most 4 (the default policy)", len(calls))
					}
					for i := 1; i < len(calls); i++ {
						if gap := calls[i].at - calls[i-1].at; gap < minDelay {
							t.Fatalf("attempts %d and %d only %v apart (a busy loop)", i, i+1, gap)
						}
					}
					s := f.Stats()
					var dropped uint64
					for _, n := range s.Dropped {
						dropped += n
					}
					if s.Queued != 0 || s.InFlight != 0 || s.GaveUp+dropped != 1 {
						t.Fatalf("two hours later: %+v; want the call ended", s)
					}
				})
			})
		}
	}
}
