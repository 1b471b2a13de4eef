package nacos

import (
	"math"
	"testing"
	"time"

	"github.com/rebound-go/rebound/internal/sat"
)

// TestJitterSaturates: the periodic check's and the redo grace's jitter
// (up to 1.25 and 1.5 times the option) of a huge option stays positive
// and at least the option's low end. (float64(d)*1.2 converted back
// overflowed into a negative delay: the timer fired at once, again and
// again.)
func TestJitterSaturates(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, time.Hour, math.MaxInt64 / 2, math.MaxInt64} {
		for _, r := range []struct{ lo, hi float64 }{{0.75, 1.25}, {1, 1.5}} {
			for range 100 {
				got := jitter(d, r.lo, r.hi)
				if got < sat.Mul(d, r.lo) || got <= 0 {
					t.Fatalf("jitter(%v, %v, %v) = %v, want in [%v, %v x d] (saturated)", d, r.lo, r.hi, got, r.lo, r.hi)
				}
			}
		}
	}
}
