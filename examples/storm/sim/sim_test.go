package sim_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/examples/storm/sim"
	"github.com/rebound-go/rebound/internal/admit"
)

// strategy returns the named strategy of sim.Strategies with the defaults,
// or one of the extra policies "exponential" and "equal-jitter".
func strategy(t testing.TB, name string) sim.Strategy {
	t.Helper()
	extra := []sim.Strategy{
		{Name: "exponential", Policy: rebound.Policy{Jitter: rebound.NoJitter}},
		{Name: "equal-jitter", Policy: rebound.Policy{Jitter: rebound.EqualJitter}},
	}
	for _, s := range append(sim.Strategies(sim.DefaultInterval), extra...) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no strategy %q", name)
	return sim.Strategy{}
}

func simulate(t testing.TB, cfg sim.Config, s sim.Strategy) sim.Result {
	t.Helper()
	r, err := sim.Simulate(cfg, s)
	if err != nil {
		t.Fatalf("Simulate(%s): %v", s.Name, err)
	}
	return r
}

// recorder collects the calls of a run, per process.
type recorder struct {
	calls  []sim.Call
	byProc map[int][]sim.Call
}

func (r *recorder) observe(c sim.Call) {
	if r.byProc == nil {
		r.byProc = map[int][]sim.Call{}
	}
	r.calls = append(r.calls, c)
	r.byProc[c.Process] = append(r.byProc[c.Process], c)
}

// checkTotals checks the identities every Result satisfies.
func checkTotals(t *testing.T, r sim.Result) {
	t.Helper()
	if got := r.FailedDown + r.Rejected + int64(r.Succeeded); got != r.Calls {
		t.Errorf("%s: FailedDown %d + Rejected %d + Succeeded %d = %d, want Calls %d",
			r.Strategy, r.FailedDown, r.Rejected, r.Succeeded, got, r.Calls)
	}
	var retries int64
	for _, n := range r.Retries {
		retries += int64(n)
	}
	if r.Throttled == 0 && r.DroppedBudget == 0 {
		if want := r.Calls - int64(r.Tasks); retries != want {
			t.Errorf("%s: sum of Retries = %d, want Calls - Tasks = %d", r.Strategy, retries, want)
		}
	}
	if r.Converged != (r.Succeeded == r.Tasks) {
		t.Errorf("%s: Converged = %v with %d/%d succeeded", r.Strategy, r.Converged, r.Succeeded, r.Tasks)
	}
	if r.Succeeded+r.DroppedBudget+r.GaveUp > r.Tasks {
		t.Errorf("%s: %d succeeded + %d dropped + %d gave up > %d calls", r.Strategy, r.Succeeded, r.DroppedBudget, r.GaveUp, r.Tasks)
	}
	if r.P99Retries > r.PeakRetries {
		t.Errorf("%s: P99 %d > peak %d", r.Strategy, r.P99Retries, r.PeakRetries)
	}
}

// Fixed interval I, no capacity limit, server down for D (calls at t < D
// fail): every client calls at k·I for k = 0, 1, ..., ceil(D/I) and
// succeeds at the first multiple of I that is >= D, so it makes
// ceil(D/I)+1 calls.
func TestFixedIntervalUnlimitedCapacity(t *testing.T) {
	const n = 40
	interval := 5 * time.Second
	for _, down := range []time.Duration{0, time.Nanosecond, 4900 * time.Millisecond, 5 * time.Second, 10 * time.Second, 12 * time.Second} {
		t.Run(down.String(), func(t *testing.T) {
			var rec recorder
			cfg := sim.Config{Processes: n, Down: down, Capacity: 0, Seed: 1, Observe: rec.observe}
			r := simulate(t, cfg, sim.Strategies(interval)[0])
			checkTotals(t, r)

			k := int64(math.Ceil(float64(down) / float64(interval))) // failed calls per client
			successAt := time.Duration(k) * interval
			if r.Calls != n*(k+1) || r.FailedDown != n*k || r.Rejected != 0 || r.Succeeded != n {
				t.Errorf("calls %d, down %d, rejected %d, succeeded %d; want %d, %d, 0, %d",
					r.Calls, r.FailedDown, r.Rejected, r.Succeeded, n*(k+1), n*k, n)
			}
			if !r.Converged || r.DoneAt != successAt || r.MaxAttempts != int(k+1) {
				t.Errorf("converged %v at %v after at most %d calls; want true at %v after %d",
					r.Converged, r.DoneAt, r.MaxAttempts, successAt, k+1)
			}
			for c := range n {
				calls := rec.byProc[c]
				if len(calls) != int(k+1) {
					t.Fatalf("client %d made %d calls, want %d", c, len(calls), k+1)
				}
				for j, call := range calls {
					want := sim.Down
					if j == int(k) {
						want = sim.OK
					}
					if call.At != time.Duration(j)*interval || call.Attempt != j+1 || call.Outcome != want {
						t.Fatalf("client %d call %d = %+v, want attempt %d at %v, %v", c, j, call, j+1, time.Duration(j)*interval, want)
					}
				}
			}
			// Every retry of the crowd lands in the same window.
			if k > 0 && r.PeakRetries != n {
				t.Errorf("peak retries per window = %d, want %d", r.PeakRetries, n)
			}
		})
	}
}

// Exponential backoff without jitter, rebound defaults (1 s doubling,
// capped at 30 s): calls at 0, 1, 3, 7, 15, 31, 61, 91, 121 s.
func TestExponentialNoJitterCallTimes(t *testing.T) {
	var rec recorder
	cfg := sim.Config{Processes: 25, Down: 100 * time.Second, Seed: 9, Observe: rec.observe}
	r := simulate(t, cfg, strategy(t, "exponential"))
	checkTotals(t, r)
	want := []time.Duration{0, 1, 3, 7, 15, 31, 61, 91, 121}
	for c := range cfg.Processes {
		calls := rec.byProc[c]
		if len(calls) != len(want) {
			t.Fatalf("client %d: %d calls, want %d", c, len(calls), len(want))
		}
		for j, call := range calls {
			if call.At != want[j]*time.Second {
				t.Errorf("client %d call %d at %v, want %v", c, j+1, call.At, want[j]*time.Second)
			}
		}
		if last := calls[len(calls)-1]; last.Outcome != sim.OK {
			t.Errorf("client %d: last call %v, want ok", c, last.Outcome)
		}
	}
	if r.DoneAt != 121*time.Second || r.Calls != int64(cfg.Processes*len(want)) {
		t.Errorf("DoneAt %v, Calls %d; want 2m1s, %d", r.DoneAt, r.Calls, cfg.Processes*len(want))
	}
}

// With a capacity of 50 calls per 100 ms and 200 clients retrying in
// lockstep every 5 s, the server serves 50 clients per round, in client
// order (ties in virtual time go to the lower index).
func TestFixedIntervalCapacityRounds(t *testing.T) {
	var rec recorder
	cfg := sim.Config{Processes: 200, Down: 10 * time.Second, Capacity: 500, Seed: 1, Observe: rec.observe}
	r := simulate(t, cfg, strategy(t, "fixed-5s"))
	checkTotals(t, r)
	// t=0, 5: 400 down; t=10: 150 rejected; t=15: 100; t=20: 50; t=25: done.
	if r.FailedDown != 400 || r.Rejected != 300 || r.Calls != 900 || r.DoneAt != 25*time.Second {
		t.Errorf("down %d, rejected %d, calls %d, done at %v; want 400, 300, 900, 25s",
			r.FailedDown, r.Rejected, r.Calls, r.DoneAt)
	}
	for c := range cfg.Processes {
		calls := rec.byProc[c]
		last := calls[len(calls)-1]
		if want := 10*time.Second + time.Duration(c/50)*5*time.Second; last.At != want || last.Outcome != sim.OK {
			t.Errorf("client %d: last call %+v, want ok at %v", c, last, want)
		}
	}
}

// Full jitter against a small capacity: overload rejections happen, but
// only once the server is up; no window serves more than its capacity;
// every failure before Down is a "down" failure.
func TestFullJitterCapacity(t *testing.T) {
	var rec recorder
	cfg := sim.Config{Processes: 2000, Down: 10 * time.Second, Capacity: 100, Seed: 3, Observe: rec.observe}
	r := simulate(t, cfg, strategy(t, "full-jitter"))
	checkTotals(t, r)
	if !r.Converged {
		t.Fatalf("full jitter did not converge: %d left", r.NotConverged())
	}
	if r.Rejected == 0 {
		t.Errorf("no call rejected for overload with 2000 clients and 10 calls per window")
	}
	served := map[int64]int{}
	for _, c := range rec.calls {
		switch {
		case c.At < cfg.Down && c.Outcome != sim.Down:
			t.Fatalf("call before recovery: %+v, want down", c)
		case c.At >= cfg.Down && c.Outcome == sim.Down:
			t.Fatalf("call after recovery failed as down: %+v", c)
		case c.Outcome == sim.OK:
			served[int64(c.At/sim.Window)]++
		}
	}
	for w, n := range served {
		if n > 10 {
			t.Errorf("window %d served %d calls, capacity 10", w, n)
		}
	}
	if got := len(rec.calls); int64(got) != r.Calls {
		t.Errorf("observed %d calls, Result.Calls = %d", got, r.Calls)
	}
}

// A per-process limiter caps each process's retries at rate·100ms + burst
// per window, and never delays a first call.
func TestLimiterCapsRetriesPerProcess(t *testing.T) {
	cfg := sim.Config{Processes: 3, Calls: 1000, Down: 10 * time.Second, Capacity: 500, Seed: 5}
	const limit, burst = 100, 7
	s := sim.Strategy{Name: "limited", Policy: rebound.Policy{}, Process: sim.Limiter(limit, burst)}
	first := 0
	perWindow := map[[2]int64]int{}
	cfg.Observe = func(call sim.Call) {
		if call.Attempt == 1 && call.At == 0 {
			first++
		}
		if call.Attempt > 1 {
			perWindow[[2]int64{int64(call.Process), int64(call.At / sim.Window)}]++
		}
	}
	r := simulate(t, cfg, s)
	checkTotals(t, r)
	if first != cfg.Tasks() {
		t.Errorf("%d first calls at t=0, want %d", first, cfg.Tasks())
	}
	bound := int(limit*sim.Window.Seconds()) + burst // 10 + 7
	peak := 0
	for _, n := range perWindow {
		peak = max(peak, n)
	}
	if peak > bound || peak < bound/2 {
		t.Errorf("peak retries of one process per window = %d, want in [%d, %d]", peak, bound/2, bound)
	}
	if r.LimiterWait <= 0 {
		t.Errorf("limiter wait %v, want > 0", r.LimiterWait)
	}
}

// A limiter with an infinite rate never delays anything: same run as no
// limiter at all.
func TestInfiniteLimiterIsNoLimiter(t *testing.T) {
	cfg := sim.Config{Processes: 300, Down: 10 * time.Second, Capacity: 200, Seed: 11}
	plain := strategy(t, "equal-jitter")
	inf := plain
	inf.Process = sim.Limiter(rate.Inf, 0)
	a, b := simulate(t, cfg, plain), simulate(t, cfg, inf)
	b.Strategy = a.Strategy
	if !reflect.DeepEqual(a, b) {
		t.Errorf("rate.Inf limiter changed the run:\n%+v\n%+v", a, b)
	}
}

func TestDeterministic(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Processes = 500
	for _, s := range sim.Strategies(sim.DefaultInterval) {
		a, b := simulate(t, cfg, s), simulate(t, cfg, s)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs with seed %d differ", s.Name, cfg.Seed)
		}
	}
	other := cfg
	other.Seed = cfg.Seed + 1
	s := strategy(t, "full-jitter")
	if a, b := simulate(t, cfg, s), simulate(t, other, s); reflect.DeepEqual(a.Retries, b.Retries) {
		t.Errorf("seeds %d and %d gave the same full-jitter run", cfg.Seed, other.Seed)
	}
}

// The point of the example: in the default storm, jitter spreads the
// retries, lockstep strategies hit the server with the whole crowd at once.
func TestJitterFlattensThePeak(t *testing.T) {
	cfg := sim.DefaultConfig()
	results := map[string]sim.Result{}
	for _, s := range append(sim.Strategies(sim.DefaultInterval), strategy(t, "exponential"), strategy(t, "equal-jitter")) {
		r := simulate(t, cfg, s)
		checkTotals(t, r)
		if !r.Converged && !strings.Contains(s.Name, "throttle") && s.Name != "failback-default" {
			t.Errorf("%s did not converge", s.Name)
		}
		results[s.Name] = r
	}
	for _, lockstep := range []string{"fixed-5s", "exponential"} {
		if got := results[lockstep].PeakRetries; got != cfg.Processes {
			t.Errorf("%s peak = %d, want every client in one window (%d)", lockstep, got, cfg.Processes)
		}
	}
	fixed := results["fixed-5s"]
	for _, name := range []string{"full-jitter", "equal-jitter", "fleet"} {
		r := results[name]
		if r.PeakRetries*4 > fixed.PeakRetries {
			t.Errorf("%s peak %d not far below fixed-interval peak %d", name, r.PeakRetries, fixed.PeakRetries)
		}
		if r.Calls >= fixed.Calls || r.DoneAt >= fixed.DoneAt {
			t.Errorf("%s: %d calls, done at %v; fixed interval: %d, %v", name, r.Calls, r.DoneAt, fixed.Calls, fixed.DoneAt)
		}
		if r.Rejected >= fixed.Rejected {
			t.Errorf("%s rejected %d, fixed interval %d", name, r.Rejected, fixed.Rejected)
		}
	}
}

func TestHorizonStopsANonConvergingStrategy(t *testing.T) {
	cfg := sim.Config{Processes: 1000, Down: 10 * time.Second, Capacity: 100, Seed: 1, Horizon: time.Minute}
	r := simulate(t, cfg, strategy(t, "fixed-5s"))
	checkTotals(t, r)
	// Rounds at 10, 15, ..., 60 s serve 10 clients each.
	if r.Converged || r.Succeeded != 110 || r.NotConverged() != 890 || r.End != time.Minute || r.DoneAt != time.Minute {
		t.Errorf("converged %v, succeeded %d, left %d, end %v, last success %v; want false, 110, 890, 1m, 1m",
			r.Converged, r.Succeeded, r.NotConverged(), r.End, r.DoneAt)
	}
}

func TestGiveUp(t *testing.T) {
	s := sim.Strategy{Name: "three", Policy: rebound.Policy{Jitter: rebound.NoJitter}, Limits: []rebound.Option{rebound.WithMaxAttempts(3)}}
	r := simulate(t, sim.Config{Processes: 10, Down: time.Hour}, s)
	checkTotals(t, r)
	if r.GaveUp != 10 || r.Converged || r.Calls != 30 || r.MaxAttempts != 3 || r.End != 3*time.Second {
		t.Errorf("gave up %d, converged %v, calls %d, max attempts %d, end %v; want 10, false, 30, 3, 3s",
			r.GaveUp, r.Converged, r.Calls, r.MaxAttempts, r.End)
	}
}

// With capacity C not a multiple of 10 calls/s, window k serves
// floor(C(k+1)/10) - floor(Ck/10): 15/s alternates 1 and 2 per window.
func TestFractionalCapacity(t *testing.T) {
	var rec recorder
	cfg := sim.Config{Processes: 200, Down: 0, Capacity: 15, Seed: 2, Observe: rec.observe}
	r := simulate(t, cfg, strategy(t, "full-jitter"))
	checkTotals(t, r)
	served := map[int64]int{}
	for _, c := range rec.calls {
		if c.Outcome == sim.OK {
			served[int64(c.At/sim.Window)]++
		}
	}
	if served[0] != 1 {
		t.Errorf("window 0 served %d, want 1 (floor(1.5))", served[0])
	}
	for w, n := range served {
		want := int(math.Floor(15*float64(w+1)/10) - math.Floor(15*float64(w)/10))
		if n > want {
			t.Errorf("window %d served %d, capacity %d", w, n, want)
		}
	}
}

func TestInvalid(t *testing.T) {
	good := sim.DefaultConfig()
	fs := strategy(t, "full-jitter")
	tests := []struct {
		name string
		cfg  func(*sim.Config)
		s    func(*sim.Strategy)
		want string
	}{
		{"no processes", func(c *sim.Config) { c.Processes = 0 }, nil, "Processes"},
		{"negative calls", func(c *sim.Config) { c.Calls = -1 }, nil, "Calls"},
		{"too many calls", func(c *sim.Config) { c.Processes, c.Calls = 1<<20, 1<<10 }, nil, "Processes × Calls"},
		{"negative down", func(c *sim.Config) { c.Down = -1 }, nil, "Down"},
		{"NaN capacity", func(c *sim.Config) { c.Capacity = math.NaN() }, nil, "Capacity"},
		{"huge capacity", func(c *sim.Config) { c.Capacity = 2e9 }, nil, "Capacity"},
		{"negative horizon", func(c *sim.Config) { c.Horizon = -time.Second }, nil, "Horizon"},
		{"bad policy", nil, func(s *sim.Strategy) { s.Policy.Multiplier = 0.5 }, "Multiplier"},
		{"bad option", nil, func(s *sim.Strategy) {
			s.Process = func(sim.Env) []rebound.Option {
				return []rebound.Option{rebound.WithLimiter(nil), admit.Seed(1).(rebound.Option)}
			}
		}, "Strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, s := good, fs
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			if tt.s != nil {
				tt.s(&s)
			}
			_, err := sim.Simulate(cfg, s)
			if !errors.Is(err, sim.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Simulate: %v; want an ErrInvalid naming %s", err, tt.want)
			}
		})
	}
}

func TestStrategies(t *testing.T) {
	all := sim.Strategies(sim.DefaultInterval)
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
		if _, err := rebound.NewRetrier(s.Policy); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if (s.Process != nil) != strings.Contains(s.Name, "+") {
			t.Errorf("%s: Process set %v", s.Name, s.Process != nil)
		}
		if s.HonorRetryAfter != (s.Name != "fixed-5s" && s.Name != "full-jitter") {
			t.Errorf("%s: HonorRetryAfter %v", s.Name, s.HonorRetryAfter)
		}
	}
	want := "fixed-5s full-jitter rebound failback-default rebound+budget rebound+throttle rebound+budget+throttle fleet"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("names = %s\nwant %s", got, want)
	}
}

func TestClientSeed(t *testing.T) {
	seen := map[uint64]bool{}
	for seed := range uint64(3) {
		for i := range 10000 {
			s := sim.ClientSeed(seed, i)
			if seen[s] {
				t.Fatalf("ClientSeed(%d, %d) = %#x repeats", seed, i, s)
			}
			seen[s] = true
		}
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[sim.Outcome]string{sim.OK: "ok", sim.Down: "down", sim.Rejected: "rejected", 0: "Outcome(0)"} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", o, got, want)
		}
	}
}

// BenchmarkSimulate measures one run of 10,000 clients in the default
// scenario (500 calls/s after 10 s down).
func BenchmarkSimulate(b *testing.B) {
	cfg := sim.DefaultConfig()
	cfg.Processes = 10000
	for _, name := range []string{"full-jitter", "rebound+budget+throttle", "fixed-5s", "fleet"} {
		s := strategy(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var calls int64
			for b.Loop() {
				r, err := sim.Simulate(cfg, s)
				if err != nil {
					b.Fatal(err)
				}
				calls = r.Calls
			}
			b.ReportMetric(float64(calls), "calls/run")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*calls), "ns/call")
		})
	}
}
