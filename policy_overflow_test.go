package rebound_test

import (
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// A delay near the maximum duration, added to the elapsed time, must not
// wrap negative and slip under MaxElapsed: the BackOff stops.
func TestBackOffMaxElapsedNoOverflow(t *testing.T) {
	p := rebound.Policy{Initial: math.MaxInt64, Max: math.MaxInt64, Jitter: rebound.NoJitter}
	clk := &stepClock{t: t0}
	b := p.NewBackOff(rebound.WithClock(clk), rebound.WithMaxElapsed(time.Hour))
	clk.t = t0.Add(time.Second)
	if d := b.NextBackOff(); d != backoff.Stop {
		t.Fatalf("NextBackOff = %v one second in, with a delay of %v and MaxElapsed 1h; want backoff.Stop", d, time.Duration(math.MaxInt64))
	}
}
