package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Window is the width of the windows calls are counted in and the server's
// capacity is enforced in. Windows are aligned on t = 0.
const Window = 100 * time.Millisecond

// windowsPerSecond is how many Windows make a second.
const windowsPerSecond = int64(time.Second / Window)

// Defaults used by DefaultConfig (and, for DefaultHorizon, by a zero
// Config.Horizon).
const (
	DefaultClients  = 1000
	DefaultDown     = 10 * time.Second
	DefaultCapacity = 500.0 // calls per second: 50 per 100 ms window
	DefaultSeed     = 1
	DefaultHorizon  = time.Hour
)

// MaxCapacity bounds Config.Capacity, so per-window arithmetic stays exact.
const MaxCapacity = 1e9

// ErrInvalid is wrapped by the errors Simulate returns for a bad Config or
// Strategy.
var ErrInvalid = errors.New("sim: invalid argument")

// Config describes the scenario: who calls, when the server is down, how
// much it serves once it is back, and the safety cap. The zero Config is
// not runnable (it has no clients); start from DefaultConfig.
type Config struct {
	// Clients is the number of clients, all making their first call at
	// t = 0. It must be at least 1.
	Clients int
	// Down is how long the server is down: every call made at t < Down
	// fails. 0 means the server is up from the start (an overload-only
	// scenario); it must not be negative.
	Down time.Duration
	// Capacity is how many calls per second the server serves once it is
	// up, enforced per Window (see the package doc). 0 means unlimited. It
	// must be a finite number in [0, MaxCapacity].
	Capacity float64
	// Seed determines every jitter draw: client i's BackOff is seeded with
	// ClientSeed(Seed, i).
	Seed uint64
	// Horizon is the safety cap on virtual time: events after it are not
	// simulated, and clients that have not succeeded by then count as not
	// converged. 0 means DefaultHorizon; it must not be negative.
	Horizon time.Duration
	// Observe, if not nil, is called synchronously for every call, in
	// virtual-time order (ties in client order). For tests and tracing.
	Observe func(Call)
}

// DefaultConfig returns the default scenario: 1,000 clients, server down
// for 10 s, then 500 calls/s (50 per 100 ms window), seed 1, horizon 1 h.
func DefaultConfig() Config {
	return Config{
		Clients:  DefaultClients,
		Down:     DefaultDown,
		Capacity: DefaultCapacity,
		Seed:     DefaultSeed,
		Horizon:  DefaultHorizon,
	}
}

func (c Config) validate() error {
	var errs []error
	if c.Clients < 1 {
		errs = append(errs, fmt.Errorf("Clients = %d: must be at least 1", c.Clients))
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

// Strategy is how every client retries: a rebound.Policy (each client
// builds its own BackOff from it) and, optionally, a rate limiter shared by
// all clients that every retry waits for after its backoff delay.
type Strategy struct {
	// Name labels the strategy in results.
	Name string
	// Policy is validated with Policy.Validate. Leave MaxElapsed 0: the
	// BackOff would measure it with the real clock. A MaxAttempts makes
	// clients give up (counted in Result.GaveUp).
	Policy rebound.Policy
	// Limit is the rate (retries per second) of the shared limiter; 0
	// means no limiter. rate.Inf is allowed (a limiter that never waits).
	Limit rate.Limit
	// Burst is the shared limiter's bucket size; at least 1 when Limit is
	// set and finite.
	Burst int
}

func (s Strategy) validate() error {
	var errs []error
	if err := s.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Policy: %w", err))
	}
	if s.Policy.MaxElapsed != 0 {
		errs = append(errs, fmt.Errorf("Policy.MaxElapsed = %v: must be 0 (it would read the real clock)", s.Policy.MaxElapsed))
	}
	if !(s.Limit >= 0) { // also catches NaN
		errs = append(errs, fmt.Errorf("Limit = %v: must not be negative (0 means no limiter)", s.Limit))
	}
	if s.Limit > 0 && s.Limit != rate.Inf && s.Burst < 1 {
		errs = append(errs, fmt.Errorf("Burst = %d: must be at least 1 with a finite Limit", s.Burst))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: Strategy %q: %w", ErrInvalid, s.Name, errors.Join(errs...))
	}
	return nil
}

// Outcome is what happened to one call.
type Outcome uint8

const (
	// OK: the server served the call; the client is done.
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

// Call describes one call, for Config.Observe.
type Call struct {
	Client  int           // client index, from 0
	Attempt int           // 1 for the first call
	At      time.Duration // virtual time since the server went down
	Outcome Outcome
}

// Result sums up one simulation run.
type Result struct {
	// Strategy is the Strategy's Name.
	Strategy string
	// Clients is Config.Clients.
	Clients int
	// Calls counts every call, first calls included:
	// Calls == FailedDown + Rejected + Succeeded.
	Calls int64
	// FailedDown counts calls made while the server was down.
	FailedDown int64
	// Rejected counts calls failed for overload once the server was up.
	Rejected int64
	// Succeeded counts clients that succeeded (one call each).
	Succeeded int
	// GaveUp counts clients whose BackOff returned backoff.Stop.
	GaveUp int
	// Converged reports whether every client succeeded within the Horizon.
	Converged bool
	// DoneAt is the virtual time of the last success: when Converged, the
	// time until every client succeeded.
	DoneAt time.Duration
	// End is the virtual time of the last event simulated.
	End time.Duration
	// PeakRetries is the largest number of retries (calls after the first)
	// in one Window.
	PeakRetries int
	// P99Retries is the 99th percentile (nearest rank) of retries per
	// Window, over the windows from t = 0 to the last call's.
	P99Retries int
	// MaxAttempts is the largest number of calls one client made.
	MaxAttempts int
	// LimiterWait is the total time retries waited for limiter tokens.
	LimiterWait time.Duration
	// Retries[k] counts the retries made in window k, [k·Window,
	// (k+1)·Window), up to the last call's window.
	Retries []int32
}

// NotConverged returns how many clients did not succeed.
func (r Result) NotConverged() int { return r.Clients - r.Succeeded }

// epoch anchors virtual time for the rate limiter, which takes time.Time.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ClientSeed returns the seed of client i's BackOff in a run seeded with
// seed: a SplitMix64 mix, so neighbouring clients and seeds get unrelated
// streams. It does not depend on the strategy.
func ClientSeed(seed uint64, i int) uint64 {
	return splitmix64(seed ^ splitmix64(uint64(i)+1))
}

func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// client is the state of one client between its events.
type client struct {
	bo       backoff.BackOff
	attempts int32
	// reserving: the pending event is the end of a backoff delay, where
	// the retry reserves a limiter token; otherwise it is a call.
	reserving bool
}

// event is a client's single pending event.
type event struct {
	at time.Duration
	id int32
}

// queue is a min-heap of events by (at, id), for container/heap. Each
// client has at most one pending event, so the heap holds at most
// Config.Clients entries and the top is rescheduled in place (heap.Fix).
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
	down     time.Duration
	capacity float64 // 0: unlimited
	window   int64
	served   int64
	allowed  int64
}

func (s *server) serve(t time.Duration) Outcome {
	if t < s.down {
		return Down
	}
	if s.capacity == 0 {
		return OK
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
		return OK
	}
	return Rejected
}

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
	n := cfg.Clients
	clients := make([]client, n)
	q := make(queue, n)
	for i := range clients {
		clients[i].bo = s.Policy.NewBackOff(rebound.WithSeed(ClientSeed(cfg.Seed, i)))
		q[i] = event{at: 0, id: int32(i)}
	}
	heap.Init(&q)

	var lim *rate.Limiter
	if s.Limit > 0 {
		lim = rate.NewLimiter(s.Limit, s.Burst)
	}
	srv := server{down: cfg.Down, capacity: cfg.Capacity, allowed: -1}
	res := Result{Strategy: s.Name, Clients: n}
	retries := make([]int32, 0, 1024)

	for len(q) > 0 {
		e := q[0]
		t := e.at
		if t > horizon {
			break
		}
		res.End = t
		c := &clients[e.id]

		if c.reserving {
			at := epoch.Add(t)
			d := lim.ReserveN(at, 1).DelayFrom(at)
			res.LimiterWait += d
			c.reserving = false
			q[0].at = t + d
			heap.Fix(&q, 0)
			continue
		}

		c.attempts++
		res.Calls++
		if c.attempts > 1 {
			w := int(t / Window)
			for len(retries) <= w {
				retries = append(retries, 0)
			}
			retries[w]++
		}
		out := srv.serve(t)
		if cfg.Observe != nil {
			cfg.Observe(Call{Client: int(e.id), Attempt: int(c.attempts), At: t, Outcome: out})
		}
		switch out {
		case OK:
			res.Succeeded++
			res.DoneAt = t
		case Down:
			res.FailedDown++
		case Rejected:
			res.Rejected++
		}
		if out != OK {
			d := c.bo.NextBackOff()
			if d != backoff.Stop {
				c.reserving = lim != nil
				q[0].at = t + d
				heap.Fix(&q, 0)
				continue
			}
			res.GaveUp++
		}
		c.bo = nil
		heap.Pop(&q)
	}
	for _, c := range clients {
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
