package etcd

import (
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// The repair loop's waits are drawn by the Schedule alone: the TTL/3 cap
// (the keep-alive period, so that a lease a new leader extended is found
// alive) is the policy's Max, and a server's Retry-After is capped too.
// No wait of the loop is computed outside the engine.
func TestRepairPolicyCapsEveryWaitAtAThirdOfTheTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    rebound.Policy
		ttl  int64
		max  time.Duration
	}{
		{"default policy, default TTL", rebound.Policy{}, int64(DefaultTTL / time.Second), DefaultTTL / 3},
		{"long policy, short TTL", rebound.Policy{Initial: 5 * time.Second, Max: time.Minute, Jitter: rebound.NoJitter}, 6, 2 * time.Second},
		{"short policy, long TTL", rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: rebound.NoJitter}, 60, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := repairPolicy(tc.p, tc.ttl)
			r, err := rebound.NewRetrier(p)
			if err != nil {
				t.Fatalf("NewRetrier(repairPolicy(%+v, %d)): %v", tc.p, tc.ttl, err)
			}
			if got := p.Max; got != tc.max { // repairPolicy returns a normalized policy: the one r runs
				t.Fatalf("Max = %v, want %v", got, tc.max)
			}
			now := time.Unix(0, 0)
			s := r.NewSchedule(now)
			errs := []error{errors.New("unavailable"), rebound.RetryAfter(time.Hour, errors.New("too many requests"))}
			for i := range 20 {
				a, dec := s.Admit(now)
				if dec.Stop || dec.Delay != 0 {
					t.Fatalf("attempt %d: not admitted: %+v", i+1, dec)
				}
				dec = a.Done(errs[i%2], now)
				d := dec.Delay
				if dec.Stop {
					t.Fatalf("attempt %d: the loop stopped: %v", i+1, dec.Err)
				}
				if d <= 0 || d > tc.max {
					t.Fatalf("attempt %d: wait %v, want in (0, %v]", i+1, d, tc.max)
				}
				now = now.Add(d)
			}
		})
	}
}
