package sim_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/examples/storm/sim"
)

// spy is a budget and a throttle that records what its process told it,
// so a test can check that a process learns only from its own calls.
type spy struct {
	proc                 int
	deposits, withdraws  int
	allows, accepted     int
	records              int
	refuseRetry, refuseN bool
	now                  func() time.Time
	times                []time.Duration
}

func (s *spy) Deposit() { s.deposits++ }
func (s *spy) Withdraw() bool {
	s.withdraws++
	return !s.refuseRetry
}
func (s *spy) Allow() bool {
	s.allows++
	s.times = append(s.times, s.now().Sub(sim.Epoch))
	return !s.refuseN
}
func (s *spy) Record(accepted bool) {
	s.records++
	if accepted {
		s.accepted++
	}
}

// Every process gets its own budget and throttle, fed only with its own
// calls' attempts and outcomes, on the virtual clock.
func TestProcessesShareNothing(t *testing.T) {
	cfg := sim.Config{Processes: 20, Calls: 50, Down: 2 * time.Second, Capacity: 50, Seed: 4, RetryAfter: true}
	var budgets, throttles []*spy
	s := sim.Strategy{Name: "spied", HonorRetryAfter: true,
		NewBudget: func(e sim.Env) sim.Budget {
			b := &spy{proc: len(budgets), now: e.Now}
			budgets = append(budgets, b)
			return b
		},
		NewThrottle: func(e sim.Env) sim.Throttle {
			th := &spy{proc: len(throttles), now: e.Now}
			throttles = append(throttles, th)
			return th
		},
	}
	attempts := make([]int, cfg.Processes)
	ok := make([]int, cfg.Processes)
	var last time.Duration
	cfg.Observe = func(c sim.Call) {
		attempts[c.Process]++
		if c.Outcome == sim.OK {
			ok[c.Process]++
		}
		if c.At < last {
			t.Fatalf("call at %v after one at %v", c.At, last)
		}
		last = c.At
	}
	r := simulate(t, cfg, s)
	checkTotals(t, r)
	if len(budgets) != cfg.Processes || len(throttles) != cfg.Processes {
		t.Fatalf("%d budgets, %d throttles for %d processes", len(budgets), len(throttles), cfg.Processes)
	}
	if !r.Converged || r.Rejected == 0 {
		t.Fatalf("converged %v with %d rejections; want a converged run with overload", r.Converged, r.Rejected)
	}
	for i := range cfg.Processes {
		b, th := budgets[i], throttles[i]
		if b.deposits != cfg.Calls || b.deposits+b.withdraws != attempts[i] {
			t.Errorf("process %d: %d deposits + %d withdrawals, want %d + %d attempts", i, b.deposits, b.withdraws, cfg.Calls, attempts[i]-cfg.Calls)
		}
		if th.allows != attempts[i] || th.records != attempts[i] || th.accepted != ok[i] || ok[i] != cfg.Calls {
			t.Errorf("process %d: throttle allowed %d, recorded %d (%d accepted); own calls %d, %d ok",
				i, th.allows, th.records, th.accepted, attempts[i], ok[i])
		}
		for k := 1; k < len(th.times); k++ {
			if th.times[k] < th.times[k-1] {
				t.Fatalf("process %d: clock went back from %v to %v", i, th.times[k-1], th.times[k])
			}
		}
	}
}

// A budget that refuses every retry drops every call after its first
// attempt; a throttle that refuses everything sends nothing.
func TestBudgetDropsAndThrottleRefuses(t *testing.T) {
	cfg := sim.Config{Processes: 7, Calls: 3, Down: time.Minute, Capacity: 500, Seed: 1, Horizon: 5 * time.Minute}
	r := simulate(t, cfg, sim.Strategy{Name: "broke", NewBudget: func(sim.Env) sim.Budget { return &spy{refuseRetry: true} }})
	checkTotals(t, r)
	if r.Dropped != 21 || r.Calls != 21 || r.FailedDown != 21 || r.Converged {
		t.Errorf("dropped %d, calls %d, down %d, converged %v; want 21, 21, 21, false", r.Dropped, r.Calls, r.FailedDown, r.Converged)
	}
	r = simulate(t, cfg, sim.Strategy{Name: "closed", Policy: rebound.Policy{MaxAttempts: 4},
		NewThrottle: func(e sim.Env) sim.Throttle { return &spy{refuseN: true, now: e.Now} }})
	checkTotals(t, r)
	if r.Calls != 0 || r.Throttled != 21*4 || r.GaveUp != 21 || r.MaxAttempts != 4 {
		t.Errorf("calls %d, throttled %d, gave up %d, max attempts %d; want 0, 84, 21, 4", r.Calls, r.Throttled, r.GaveUp, r.MaxAttempts)
	}
}

// The server's Retry-After is its queue position / capacity, counted from
// the end of the full window; a strategy that honours it waits at least
// that long, one that does not may come back sooner.
func TestRetryAfter(t *testing.T) {
	cfg := sim.Config{Processes: 30, Down: 0, Capacity: 100, Seed: 2, RetryAfter: true}
	for _, honour := range []bool{true, false} {
		var calls []sim.Call
		c := cfg
		c.Observe = func(call sim.Call) { calls = append(calls, call) }
		r := simulate(t, c, sim.Strategy{Name: "ra", Policy: rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond}, HonorRetryAfter: honour})
		checkTotals(t, r)
		// Window 0 serves 10 of the 30 first calls; the 20 others are told
		// 100 ms, 110 ms, ..., 290 ms.
		var ras []time.Duration
		for _, call := range calls {
			if call.Attempt == 1 && call.Outcome == sim.Rejected {
				ras = append(ras, call.RetryAfter)
			}
		}
		if len(ras) != 20 || ras[0] != 100*time.Millisecond || ras[19] != 290*time.Millisecond {
			t.Fatalf("honour %v: first Retry-Afters %v, want 20 from 100ms to 290ms by 10ms", honour, ras)
		}
		next := map[int]time.Duration{}
		for _, call := range calls {
			if call.Attempt == 2 {
				next[call.Process] = call.At
			}
		}
		early := 0
		for _, call := range calls {
			if call.Attempt == 1 && call.Outcome == sim.Rejected && next[call.Process] < call.RetryAfter {
				early++
			}
		}
		if honour && early != 0 || !honour && early != 20 {
			t.Errorf("honour %v: %d of 20 came back before their Retry-After", honour, early)
		}
		if honour && (r.Rejected != 20 || r.DoneAt != 290*time.Millisecond) {
			t.Errorf("honouring: %d rejected, done at %v; want 20 (the first calls only), 290ms", r.Rejected, r.DoneAt)
		}
	}
}

func TestPhysicalLimit(t *testing.T) {
	cfg := sim.Config{Processes: 1000, Calls: 10, Down: 10 * time.Second, Capacity: 500}
	if got := cfg.PhysicalLimit(); got != 30*time.Second || cfg.Tasks() != 10000 {
		t.Errorf("PhysicalLimit = %v, Tasks = %d; want 30s, 10000", got, cfg.Tasks())
	}
	cfg.Capacity = 0
	if got := cfg.PhysicalLimit(); got != 10*time.Second {
		t.Errorf("unlimited: PhysicalLimit = %v, want 10s", got)
	}
	cfg.Calls = 0 // DefaultCalls
	if cfg.Tasks() != 1000 {
		t.Errorf("Calls 0: Tasks = %d, want 1000", cfg.Tasks())
	}
	r := sim.Result{DoneAt: 45 * time.Second, PhysicalLimit: 30 * time.Second}
	if r.Converge() != 1.5 || (sim.Result{}).Converge() != 0 {
		t.Errorf("Converge = %v, want 1.5", r.Converge())
	}
}

// Peak counts every call the server received in one window while up,
// rejected ones included, and nothing while it was down.
func TestPeakUp(t *testing.T) {
	cfg := sim.Config{Processes: 200, Down: 10 * time.Second, Capacity: 500, Seed: 1}
	r := simulate(t, cfg, strategy(t, "fixed-5s"))
	if r.PeakUp != 200 {
		t.Errorf("fixed-5s: PeakUp = %d, want all 200 at t = 10 s", r.PeakUp)
	}
	cfg.Down = time.Hour
	cfg.Horizon = time.Minute
	if r := simulate(t, cfg, strategy(t, "fixed-5s")); r.PeakUp != 0 {
		t.Errorf("never up: PeakUp = %d, want 0", r.PeakUp)
	}
}

func TestTaskSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for i := range 100 {
		if sim.TaskSeed(1, i, 0) != sim.ClientSeed(1, i) {
			t.Fatalf("TaskSeed(1, %d, 0) != ClientSeed(1, %d)", i, i)
		}
		for j := range 100 {
			s := sim.TaskSeed(1, i, j)
			if seen[s] {
				t.Fatalf("TaskSeed(1, %d, %d) repeats", i, j)
			}
			seen[s] = true
		}
	}
}
