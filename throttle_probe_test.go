package rebound_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// After an outage a throttle's window holds only failed requests. Before
// issue 26 it then rejected each new request with probability
// requests/(requests+1) until the window forgot the outage, so a process
// with one call waited minutes for nothing once the backend was back. It
// now admits a floor of requests per window whatever the probability (its
// probes): a process with a few requests is never refused, and one that
// keeps asking a dead backend still sends few.
func TestThrottleProbesAfterOutage(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(rebound.ThrottleSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	// One call's attempts: five into a 10 s outage (all fail), then the
	// retries after it, none yet answered.
	for i, d := range []time.Duration{0, 700 * time.Millisecond, 2100 * time.Millisecond, 5300 * time.Millisecond,
		9800 * time.Millisecond, 14 * time.Second, 25 * time.Second, 41 * time.Second, 70 * time.Second} {
		now := t0.Add(d)
		if p := th.Probability(now); !th.Allow(now) {
			t.Fatalf("request %d at %v rejected locally (probability %.2f) by a throttle that has admitted only %d requests in its window: "+
				"a process with so few requests must reach the backend", i+1, d, p, i)
		}
	}
	// A dead backend asked 1,000 times in a fresh window: the probes and
	// the formula's leak, no more.
	later := t0.Add(10 * time.Minute)
	sent := 0
	for range 1000 {
		if th.Allow(later) {
			sent++
		}
	}
	if sent < 20 || sent > 40 {
		t.Fatalf("%d of 1000 requests to a backend accepting none sent in one window, want the 20 probes and a few more", sent)
	}
	// The window moves on: the next one has its probes again.
	next := later.Add(rebound.DefaultThrottleWindow)
	for i := range 20 {
		if !th.Allow(next) {
			t.Fatalf("probe %d of the next window rejected", i+1)
		}
	}
}
