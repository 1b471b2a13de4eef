package sim_test

import (
	"fmt"
	"time"

	"github.com/rebound-go/rebound/examples/storm/sim"
)

// A fleet of 100 independent processes with one call each; the server is
// down for 10 s, then serves 50 calls per 100 ms and answers rejections
// with a Retry-After. So small a crowd fits in two windows: fixed-interval
// retries arrive all at once, twice the capacity, and are served 50 at a
// time by 15 s. Full jitter never overloads the server but takes 39 s;
// the fleet strategy (decorrelated jitter capped at 7 s, honouring
// Retry-After) neither overloads it nor takes long.
func ExampleSimulate() {
	cfg := sim.Config{Processes: 100, Down: 10 * time.Second, Capacity: 500, RetryAfter: true, Seed: 1}
	for _, s := range sim.Strategies(5 * time.Second) {
		if s.Name != "fixed-5s" && s.Name != "full-jitter" && s.Name != "fleet" {
			continue
		}
		r, err := sim.Simulate(cfg, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-11s calls %3d, rejected %2d, all ok at %5v (%.2fx the physical limit), peak %.2fx capacity\n",
			r.Strategy, r.Calls, r.Rejected, r.DoneAt.Round(100*time.Millisecond), r.Converge(), float64(r.PeakUp)/50)
	}
	// Output:
	// fixed-5s    calls 350, rejected 50, all ok at   15s (1.47x the physical limit), peak 2.00x capacity
	// full-jitter calls 599, rejected  0, all ok at 39.1s (3.83x the physical limit), peak 0.06x capacity
	// fleet       calls 494, rejected  0, all ok at   17s (1.67x the physical limit), peak 0.10x capacity
}
