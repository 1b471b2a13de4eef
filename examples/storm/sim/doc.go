// Package sim is a discrete-event simulation of a retry storm, in virtual
// time: a crowd of clients lose their server at the same instant, the
// server comes back after a while with a limited capacity, and every client
// retries with its own BackOff built from a rebound.Policy — the real one,
// not a model of it — until it succeeds.
//
// # The model
//
//   - At t = 0 every one of Config.Clients clients makes its first call.
//   - The server fails every call made at t < Config.Down ("down").
//   - From t = Config.Down on it serves at most Config.Capacity calls per
//     second, counted per fixed 100 ms window aligned on t = 0 (Window):
//     window k, [k·100ms, (k+1)·100ms), serves at most
//     floor(C·(k+1)/10) − floor(C·k/10) calls (exactly C/10 when C is a
//     multiple of 10), first come first served in virtual time. A call
//     beyond that fails ("rejected for overload"); it costs nothing else
//     (no goodput collapse, no queueing). Capacity 0 means unlimited.
//   - A client whose call fails asks its BackOff for the next delay and
//     calls again after it. With a shared limiter (Strategy.Limit > 0), a
//     retry — never the first call — then waits for a token of one
//     golang.org/x/time/rate.Limiter shared by all clients, reserved with
//     ReserveN(t, 1) at the end of the backoff delay and waited for with
//     the reservation's DelayFrom(t): the semantics of rebound.WithLimiter.
//   - A client stops at its first success, when its BackOff returns
//     backoff.Stop (it gave up), or at Config.Horizon, the safety cap on
//     virtual time: a strategy that leaves clients unserved by then has
//     not converged.
//
// There is no goroutine per client and no sleeping: events (a call, or the
// end of a backoff delay that reserves a limiter token) are kept in a
// container/heap priority queue ordered by (virtual time, client index),
// so a run is deterministic for a given Config.Seed. Client i's BackOff is
// seeded with a value derived from Config.Seed and i only, so every
// strategy sees the same random stream per client (common random numbers).
//
// Everything is counted in 100 ms windows: calls, retries (calls after the
// first: the N simultaneous first calls at t = 0 are the same for every
// strategy and are left out of the per-window figures), rejections.
package sim
