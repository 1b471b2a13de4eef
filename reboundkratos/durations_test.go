package reboundkratos_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundkratos"
)

// The package's duration option, WithDrainDelay, with 0, 1 ns, a negative
// value and math.MaxInt64: a negative one is refused naming the option and
// the rule; the others are accepted, and Deregister waits that long after
// the deregistration, bounded by its ctx (math.MaxInt64: until ctx ends).
func TestDurationOptionsSweep(t *testing.T) {
	for _, d := range []time.Duration{0, 1, -time.Second, math.MaxInt64} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var f fakeRegs
				r, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithDrainDelay(d))
				if d < 0 {
					var ae *rebound.ArgumentError
					if r != nil || !errors.As(err, &ae) || ae.Func != "reboundkratos.WithDrainDelay" || !strings.Contains(ae.Reason, "must") {
						t.Fatalf("WithDrainDelay(%v) = %v; want an ArgumentError of reboundkratos.WithDrainDelay stating the rule", d, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if err := r.Register(context.Background(), helloworld()); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				if err := r.Deregister(ctx, helloworld()); err != nil {
					t.Fatal(err)
				}
				want := min(d, time.Minute)
				if got := time.Since(start); got != want {
					t.Fatalf("Deregister with WithDrainDelay(%v) took %v (fake clock), want %v", d, got, want)
				}
				if len(f.live) != 0 {
					t.Fatalf("left registered: %v", f.live)
				}
			})
		})
	}
}
