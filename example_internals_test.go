package rebound_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// TestPolicyZeroCeilings pins the zero Policy's ceilings (full jitter
// draws below them) and Validate's text for a bad Multiplier.
func TestPolicyZeroCeilings(t *testing.T) {
	p := rebound.Policy{}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := p.Ceiling(n); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w)
		}
	}
	const msg = "rebound: invalid policy: Multiplier = 0.5: must be 0 (the default, 2) or at least 1"
	if err := (rebound.Policy{Multiplier: 0.5}).Validate(); err == nil || err.Error() != msg {
		t.Errorf("Validate() = %v, want %q", err, msg)
	}
}

// TestAdaptiveThrottleProbabilityFormula pins the rejection probability,
// (requests - K×accepts) / (requests + 1), at two points.
func TestAdaptiveThrottleProbabilityFormula(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10; i++ { // 10 requests, half accepted
		th.Allow(now)
		if i%2 == 0 {
			th.Accepted(now)
		}
	}
	if got := th.Probability(now); got != 0 { // (10 - 2*5) / 11
		t.Errorf("after half accepted: Probability = %.3f, want 0.000", got)
	}
	for i := 0; i < 10; i++ { // 10 more, all rejected by the backend
		th.Allow(now)
	}
	if got, want := th.Probability(now), 10.0/21; got < want-0.0005 || got > want+0.0005 { // (20 - 2*5) / 21
		t.Errorf("after 10 rejections: Probability = %.3f, want 0.476", got)
	}
}
