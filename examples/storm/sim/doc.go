// Package sim is a discrete-event simulation of a retry storm in a fleet
// of independent processes, in virtual time: every process loses the
// server at the same instant, the server comes back after a while with a
// limited capacity, and every call retries on rebound's own step function
// (rebound.Schedule, with rebound's budget and throttle) — the real code,
// not a model of it — until it succeeds or is dropped.
//
// # The model
//
//   - At t = 0 each of Config.Processes processes makes Config.Calls calls
//     (one task each, as a failback invoker queues them).
//   - The server fails every call made at t < Config.Down ("down").
//   - From t = Config.Down on it serves at most Config.Capacity calls per
//     second, counted per fixed 100 ms window aligned on t = 0 (Window):
//     window k, [k·100ms, (k+1)·100ms), serves at most
//     floor(C·(k+1)/10) − floor(C·k/10) calls (exactly C/10 when C is a
//     multiple of 10), first come first served in virtual time. A call
//     beyond that fails ("rejected for overload"); it costs nothing else
//     (no goodput collapse, no queueing). Capacity 0 means unlimited.
//   - With Config.RetryAfter the server answers a rejection with a
//     Retry-After: it keeps a virtual queue that drains at its capacity,
//     starting at the end of the full window; the n-th caller turned away
//     is told to come back when its place comes, (n−1)/C after that. A
//     server that is down says nothing (a refused connection).
//   - Every call runs on its own rebound.Schedule — rebound's one door,
//     as failback's tasks do — of its process's rebound.Retrier: a due
//     attempt, first or retry, asks its throttle and takes its limiter
//     token with Schedule.Admit (a token wait puts it back in the queue, a
//     throttled attempt backs off); its end goes to the Attempt's Done
//     (with the server's Retry-After when Strategy.HonorRetryAfter), which
//     returns the delay or ends the call.
//   - A process owns the state its calls share, and only that: the options
//     of its Retrier (Strategy.Process): a rebound.RetryBudget (a retry it
//     refuses ends the call: dropped), a rebound.AdaptiveThrottle (an
//     attempt it rejects locally is not sent: it counts as a failed
//     attempt and the call backs off and asks again, as rebound's loops
//     do; it never ends a call by itself), a
//     golang.org/x/time/rate.Limiter. They run on the virtual clock (time
//     is passed in) and learn only from the process's own calls: no
//     process knows the fleet's size or shares anything with another.
//   - A call stops at its first success, when its Schedule stops for the
//     policy (it gave up), when its budget drops it, or at
//     Config.Horizon, the safety cap on virtual time: a strategy that
//     leaves calls unserved by then has not converged.
//
// There is no goroutine per call and no sleeping: events (an attempt, or
// the end of a limiter wait) are kept in a container/heap priority queue
// ordered by (virtual time, call index), so a run is deterministic for a
// given Config.Seed. Process i's Retrier (and so its calls' jitter) and
// throttle are seeded with ClientSeed(Seed, i), whatever the strategy
// (common random numbers).
//
// Config.PhysicalLimit, Down + Processes·Calls/Capacity, is the earliest
// time every call can have succeeded; Result.Converge is the run's time to
// converge over it. Result.PeakUp is the busiest window at the server
// while it is up, rejected calls included. Everything else is counted in
// 100 ms windows too: retries (calls after a call's first attempt; the
// simultaneous first calls at t = 0 are the same for every strategy and
// are left out of the per-window figures).
package sim
