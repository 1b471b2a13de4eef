package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// Window is the width of the windows calls are counted in and the server's
// capacity is enforced in. Windows are aligned on t = 0.
const Window = 100 * time.Millisecond

// windowsPerSecond is how many Windows make a second.
const windowsPerSecond = int64(time.Second / Window)

// Defaults used by DefaultConfig (and, for DefaultHorizon, by a zero
// Config.Horizon).
const (
	DefaultProcesses = 1000
	DefaultCalls     = 1
	DefaultDown      = 10 * time.Second
	DefaultCapacity  = 500.0 // calls per second: 50 per 100 ms window
	DefaultSeed      = 1
	DefaultHorizon   = time.Hour
)

// MaxCapacity bounds Config.Capacity, so per-window arithmetic stays exact.
const MaxCapacity = 1e9

// MaxTasks bounds Processes × Calls (the simulator keeps one event per call).
const MaxTasks = 1 << 26

// ErrInvalid is wrapped by the errors Simulate returns for a bad Config or
// Strategy.
var ErrInvalid = errors.New("sim: invalid argument")

// Config describes the scenario: who calls, when the server is down, how
// much it serves once it is back, and the safety cap. The zero Config is
// not runnable (it has no processes); start from DefaultConfig.
type Config struct {
	// Processes is the number of independent client processes. Each has
	// its own limiter, budget and throttle (Strategy) and learns only from
	// its own calls. It must be at least 1.
	Processes int
	// Calls is the number of calls each process makes at t = 0 (each then
	// retried on its own, with its own rebound.Schedule, as failback does). 0 means
	// DefaultCalls; it must not be negative.
	Calls int
	// Down is how long the server is down: every call made at t < Down
	// fails. 0 means the server is up from the start (an overload-only
	// scenario); it must not be negative.
	Down time.Duration
	// Capacity is how many calls per second the server serves once it is
	// up, enforced per Window (see the package doc). 0 means unlimited. It
	// must be a finite number in [0, MaxCapacity].
	Capacity float64
	// RetryAfter makes the server answer a call it rejects for overload
	// with a Retry-After: its queue position divided by its capacity (see
	// the package doc). A server that is down says nothing.
	RetryAfter bool
	// Seed determines every random draw: process i's Retrier is seeded
	// with ClientSeed(Seed, i) (its j-th Schedule, call j, derives its own
	// seed from it, as internal/admit's Seed documents), and so is its throttle
	// if the strategy seeds it with Env.Seed.
	Seed uint64
	// Horizon is the safety cap on virtual time: events after it are not
	// simulated, and calls that have not succeeded by then count as not
	// converged. 0 means DefaultHorizon; it must not be negative.
	Horizon time.Duration
	// Observe, if not nil, is called synchronously for every call sent to
	// the server, in virtual-time order (ties in call order). For tests
	// and tracing.
	Observe func(Call)
}

// DefaultConfig returns the default scenario: 1,000 processes with one call
// each, server down for 10 s, then 500 calls/s (50 per 100 ms window), no
// Retry-After, seed 1, horizon 1 h.
func DefaultConfig() Config {
	return Config{
		Processes: DefaultProcesses,
		Calls:     DefaultCalls,
		Down:      DefaultDown,
		Capacity:  DefaultCapacity,
		Seed:      DefaultSeed,
		Horizon:   DefaultHorizon,
	}
}

func (c Config) calls() int {
	if c.Calls == 0 {
		return DefaultCalls
	}
	return c.Calls
}

// Tasks returns Processes × Calls: how many calls the fleet must get
// through.
func (c Config) Tasks() int { return c.Processes * c.calls() }

// PhysicalLimit returns the earliest time at which every call can possibly
// have succeeded: Down + Tasks/Capacity (Down alone with unlimited
// capacity). No strategy can converge sooner.
func (c Config) PhysicalLimit() time.Duration {
	if c.Capacity == 0 {
		return c.Down
	}
	return c.Down + time.Duration(float64(c.Tasks())/c.Capacity*float64(time.Second))
}

func (c Config) validate() error {
	var errs []error
	if c.Processes < 1 {
		errs = append(errs, fmt.Errorf("Processes = %d: must be at least 1", c.Processes))
	}
	if c.Calls < 0 {
		errs = append(errs, fmt.Errorf("Calls = %d: must not be negative (0 means %d)", c.Calls, DefaultCalls))
	}
	if c.Processes >= 1 && c.Calls >= 0 && c.Processes > MaxTasks/c.calls() {
		errs = append(errs, fmt.Errorf("Processes × Calls = %d × %d: must be at most %d", c.Processes, c.calls(), MaxTasks))
	}
	if c.Down < 0 {
		errs = append(errs, fmt.Errorf("Down = %v: must not be negative", c.Down))
	}
	if !(c.Capacity >= 0 && c.Capacity <= MaxCapacity) { // also catches NaN
		errs = append(errs, fmt.Errorf("Capacity = %v: must be in [0, %g] (0 means unlimited)", c.Capacity, MaxCapacity))
	}
	if c.Horizon < 0 {
		errs = append(errs, fmt.Errorf("Horizon = %v: must not be negative (0 means %v)", c.Horizon, DefaultHorizon))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: Config: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// Outcome is what happened to one call.
type Outcome uint8

const (
	// OK: the server served the call; it is done.
	OK Outcome = iota + 1
	// Down: the call was made while the server was down.
	Down
	// Rejected: the server was up but had served its capacity for the
	// call's window.
	Rejected
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Down:
		return "down"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Call describes one call sent to the server, for Config.Observe.
type Call struct {
	Process int           // process index, from 0
	Task    int           // the call's index within its process, from 0
	Attempt int           // 1 for the first attempt (local refusals count)
	At      time.Duration // virtual time since the server went down
	Outcome Outcome
	// RetryAfter is the server's Retry-After (Rejected with
	// Config.RetryAfter only).
	RetryAfter time.Duration
}

// Result sums up one simulation run.
type Result struct {
	// Strategy is the Strategy's Name.
	Strategy string
	// Processes and Tasks are Config.Processes and Config.Tasks().
	Processes, Tasks int
	// PhysicalLimit is Config.PhysicalLimit().
	PhysicalLimit time.Duration
	// Calls counts every call sent to the server, first attempts included:
	// Calls == FailedDown + Rejected + Succeeded.
	Calls int64
	// FailedDown counts calls made while the server was down.
	FailedDown int64
	// Rejected counts calls failed for overload once the server was up.
	Rejected int64
	// Throttled counts attempts the process's throttle rejected locally
	// (Schedule.Admit, for a first attempt or a retry):
	// never sent, each counts as a failed attempt and the call backs off
	// and asks again, as rebound's loops do (see rebound.Schedule,
	// "Adaptive throttling"); a call is never dropped by its throttle.
	Throttled int64
	// Succeeded counts calls that succeeded (one server call each).
	Succeeded int
	// DroppedBudget counts calls that ended because the process's budget
	// (rebound.ErrBudgetExhausted) refused their next retry: they are
	// never retried again.
	DroppedBudget int
	// GaveUp counts calls whose Schedule stopped for their limits
	// (Strategy.Limits), after a failure or after an attempt the
	// throttle rejected (GaveUpThrottled counts those).
	GaveUp int
	// GaveUpThrottled counts the calls of GaveUp whose last attempt the
	// throttle rejected locally (rebound.ErrThrottled as the last error).
	GaveUpThrottled int
	// Converged reports whether every call succeeded within the Horizon.
	Converged bool
	// DoneAt is the virtual time of the last success: when Converged, the
	// time until every call succeeded.
	DoneAt time.Duration
	// End is the virtual time of the last event simulated.
	End time.Duration
	// PeakUp is the largest number of calls the server received in one
	// Window while it was up (t >= Down): the load it had to turn away
	// or serve. 0 if no call reached it up.
	PeakUp int
	// PeakRetries is the largest number of retries (calls after a call's
	// first attempt) in one Window, outage included.
	PeakRetries int
	// P99Retries is the 99th percentile (nearest rank) of retries per
	// Window, over the windows from t = 0 to the last call's.
	P99Retries int
	// MaxAttempts is the largest number of attempts one call made (local
	// refusals included).
	MaxAttempts int
	// LimiterWait is the total time retries waited for limiter tokens
	// (Schedule.Admit).
	LimiterWait time.Duration
	// Retries[k] counts the retries sent in window k, [k·Window,
	// (k+1)·Window), up to the last call's window.
	Retries []int32
}

// NotConverged returns how many calls did not succeed.
func (r Result) NotConverged() int { return r.Tasks - r.Succeeded }

// Converge returns DoneAt / PhysicalLimit (0 if the limit is 0), the
// figure the target bounds at 1.5. It is meaningful only when
// Converged.
func (r Result) Converge() float64 {
	if r.PhysicalLimit <= 0 {
		return 0
	}
	return float64(r.DoneAt) / float64(r.PhysicalLimit)
}

// Epoch anchors virtual time for rebound's Schedules, budgets, throttles
// and limiters, which take a time.Time: virtual time t is Epoch.Add(t).
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ClientSeed returns the seed of process i's Retrier and own random draws
// in a run seeded with seed: a SplitMix64 mix, so neighbouring
// processes and seeds get unrelated streams. It does not depend on the
// strategy.
func ClientSeed(seed uint64, i int) uint64 {
	return splitmix64(seed ^ splitmix64(uint64(i)+1))
}

func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// task is the state of one call between its events.
type task struct {
	sched    *rebound.Schedule
	att      rebound.Attempt // the attempt sched admitted last
	proc     int32
	idx      int32
	attempts int32
}

// event is a task's single pending event.
type event struct {
	at time.Duration
	id int32
}

// queue is a min-heap of events by (at, id), for container/heap. Each
// task has at most one pending event, so the heap holds at most Tasks
// entries and the top is rescheduled in place (heap.Fix).
type queue []event

// Pointer receivers throughout: heap calls them through a *queue, and a
// value method would go through an extra wrapper.
func (q *queue) Len() int { return len(*q) }
func (q *queue) Less(a, b int) bool {
	ea, eb := &(*q)[a], &(*q)[b]
	if ea.at != eb.at {
		return ea.at < eb.at
	}
	return ea.id < eb.id
}
func (q *queue) Swap(a, b int) { (*q)[a], (*q)[b] = (*q)[b], (*q)[a] }
func (q *queue) Push(x any)    { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// server enforces the capacity per window; calls arrive in time order.
type server struct {
	down       time.Duration
	capacity   float64 // 0: unlimited
	retryAfter bool
	window     int64
	served     int64
	allowed    int64
	// next is the virtual time of the next free place in the server's
	// virtual queue (RetryAfter): each rejection takes one place, 1/C long.
	next time.Duration
}

func (s *server) serve(t time.Duration) (Outcome, time.Duration) {
	if t < s.down {
		return Down, 0
	}
	if s.capacity == 0 {
		return OK, 0
	}
	if w := int64(t / Window); w != s.window || s.allowed < 0 {
		s.window, s.served = w, 0
		// floor(C(k+1)/10) - floor(Ck/10): exactly C/10 per window when C
		// is a multiple of 10, and C per second on average otherwise.
		s.allowed = int64(math.Floor(s.capacity*float64(w+1)/float64(windowsPerSecond))) -
			int64(math.Floor(s.capacity*float64(w)/float64(windowsPerSecond)))
	}
	if s.served < s.allowed {
		s.served++
		return OK, 0
	}
	if !s.retryAfter {
		return Rejected, 0
	}
	// Queue position / capacity: the n-th caller turned away (counted
	// from now) is told to come back n/C from now, and the virtual queue
	// drains at the capacity.
	s.next = max(s.next, (time.Duration(s.window)+1)*Window)
	ra := s.next - t
	s.next += time.Duration(float64(time.Second) / s.capacity)
	return Rejected, ra
}

// Errors the simulated server answers with: transient, so that rebound
// retries them and the throttle counts them as rejections.
var (
	errDown     = rebound.Transient(errors.New("sim: server down"))
	errRejected = rebound.Transient(errors.New("sim: rejected for overload"))
)

// Simulate runs strategy s in scenario cfg and returns its figures. It is
// deterministic: the same cfg and s give the same Result. It returns an
// error wrapping ErrInvalid for an invalid cfg or s. Simulate is safe to
// call concurrently (runs share nothing), as long as cfg.Observe is.
func Simulate(cfg Config, s Strategy) (Result, error) {
	if err := errors.Join(cfg.validate(), s.validate()); err != nil {
		return Result{}, err
	}
	horizon := cfg.Horizon
	if horizon == 0 {
		horizon = DefaultHorizon
	}
	m := cfg.calls()
	n := cfg.Tasks()

	// Every process has its own Retrier (its budget, throttle and limiter),
	// seeded with its own seed: call j is its j-th Schedule.
	procs := make([]*rebound.Retrier, cfg.Processes)
	for i := range procs {
		env := Env{Seed: ClientSeed(cfg.Seed, i)}
		opts := append([]rebound.Option{admit.Seed(env.Seed).(rebound.Option)}, s.Limits...)
		if s.Process != nil {
			opts = append(opts, s.Process(env)...)
		}
		r, err := rebound.NewRetrier(s.Policy, opts...)
		if err != nil {
			return Result{}, fmt.Errorf("%w: Strategy %q: %w", ErrInvalid, s.Name, err)
		}
		procs[i] = r
	}
	tasks := make([]task, n)
	q := make(queue, n)
	for id := range tasks {
		i, j := id/m, id%m
		tasks[id] = task{sched: procs[i].NewSchedule(Epoch), proc: int32(i), idx: int32(j)}
		q[id] = event{at: 0, id: int32(id)}
	}
	heap.Init(&q)

	srv := server{down: cfg.Down, capacity: cfg.Capacity, retryAfter: cfg.RetryAfter, allowed: -1}
	res := Result{Strategy: s.Name, Processes: cfg.Processes, Tasks: n, PhysicalLimit: cfg.PhysicalLimit()}
	retries := make([]int32, 0, 1024)
	upWindow, upCount := int64(-1), 0

	// failed reports the top task's failed attempt (err) to its Schedule
	// and schedules the next one; it reports false if the call ended.
	failed := func(t time.Duration, c *task, err error) bool {
		dec := c.att.Done(err, Epoch.Add(t))
		if !dec.Stop {
			q[0].at = t + dec.Delay
			heap.Fix(&q, 0)
			return true
		}
		stop := dec.Err
		switch {
		case errors.Is(stop, rebound.ErrBudgetExhausted):
			res.DroppedBudget++
		default:
			res.GaveUp++
		}
		return false
	}

	for len(q) > 0 {
		e := q[0]
		t := e.at
		if t > horizon {
			break
		}
		now := Epoch.Add(t)
		res.End = t
		c := &tasks[e.id]

		if c.attempts > 0 {
			// A retry is due: the throttle, then the limiter token (if
			// any), now, in time order; a wait puts it back in the queue
			// with the token held (asked again then, it is admitted); a
			// throttled attempt is not sent and backs off.
			a, d := c.sched.Admit(now) // a retry
			switch {
			case d.Stop:
				res.GaveUp++
				if d.Reason != nil {
					res.Throttled++
					res.GaveUpThrottled++
				}
				c.sched = nil
				heap.Pop(&q)
				continue
			case d.Delay > 0 && d.Reason != nil: // refused locally
				res.Throttled++
				c.attempts++
				q[0].at = t + d.Delay
				heap.Fix(&q, 0)
				continue
			case d.Delay > 0: // a limiter token
				res.LimiterWait += d.Delay
				q[0].at = t + d.Delay
				heap.Fix(&q, 0)
				continue
			}
			c.att = a
		}
		c.attempts++
		if c.attempts == 1 {
			a, d := c.sched.Admit(now) // the first attempt
			if d.Stop || d.Delay > 0 {
				// Rejected locally: not sent, it backs off as after a
				// failure (or the policy allows no further attempt).
				res.Throttled++
				if d.Stop {
					res.GaveUp++
					res.GaveUpThrottled++
					c.sched = nil
					heap.Pop(&q)
					continue
				}
				q[0].at = t + d.Delay
				heap.Fix(&q, 0)
				continue
			}
			c.att = a
		}

		res.Calls++
		if c.attempts > 1 {
			w := int(t / Window)
			for len(retries) <= w {
				retries = append(retries, 0)
			}
			retries[w]++
		}
		out, ra := srv.serve(t)
		if out != Down {
			if w := int64(t / Window); w != upWindow {
				upWindow, upCount = w, 0
			}
			upCount++
			res.PeakUp = max(res.PeakUp, upCount)
		}
		if cfg.Observe != nil {
			cfg.Observe(Call{Process: int(c.proc), Task: int(c.idx), Attempt: int(c.attempts), At: t, Outcome: out, RetryAfter: ra})
		}
		var err error
		switch out {
		case OK:
			res.Succeeded++
			res.DoneAt = t
			c.att.Done(nil, now)
		case Down:
			res.FailedDown++
			err = errDown
		case Rejected:
			res.Rejected++
			err = errRejected
			if ra > 0 && s.HonorRetryAfter {
				err = rebound.RetryAfter(ra, errRejected)
			}
		}
		if err != nil && failed(t, c, err) {
			continue
		}
		c.sched = nil
		heap.Pop(&q)
	}
	for _, c := range tasks {
		res.MaxAttempts = max(res.MaxAttempts, int(c.attempts))
	}

	res.Converged = res.Succeeded == n
	res.Retries = slices.Clip(retries)
	res.PeakRetries, res.P99Retries = peakAndP99(retries)
	return res, nil
}

// peakAndP99 returns the maximum and the nearest-rank 99th percentile of
// the per-window counts.
func peakAndP99(perWindow []int32) (peak, p99 int) {
	if len(perWindow) == 0 {
		return 0, 0
	}
	sorted := slices.Clone(perWindow)
	slices.Sort(sorted)
	rank := int(math.Ceil(0.99 * float64(len(sorted))))
	return int(sorted[len(sorted)-1]), int(sorted[rank-1])
}
