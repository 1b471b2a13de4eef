package sim_test

import (
	"fmt"
	"time"

	"github.com/rebound-go/rebound/examples/storm/sim"
)

// 100 clients, server down for 10 s, then 50 calls per 100 ms. The
// fixed-interval and exponential crowds arrive all at once, 100 in one
// window, and are served 50 at a time: calls at 0, 5, 10, 15 s and at 0, 1,
// 3, 7, 15, 31 s. The jittered crowd never exceeds the capacity, at the
// price of more calls while the server is down (its first delays are
// short) and a longer tail.
func ExampleSimulate() {
	cfg := sim.Config{Clients: 100, Down: 10 * time.Second, Capacity: 500, Seed: 1}
	for _, s := range sim.Strategies(5*time.Second, 0, 0)[:3] {
		r, err := sim.Simulate(cfg, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-12s calls %3d, rejected %2d, all ok at %v, peak %3d retries/100ms\n",
			r.Strategy, r.Calls, r.Rejected, r.DoneAt.Round(100*time.Millisecond), r.PeakRetries)
	}
	// Output:
	// fixed-5s     calls 350, rejected 50, all ok at 15s, peak 100 retries/100ms
	// exponential  calls 550, rejected 50, all ok at 31s, peak 100 retries/100ms
	// full-jitter  calls 599, rejected  0, all ok at 39.1s, peak  18 retries/100ms
}
