// Package rebound retries failed calls without the usual bugs of hand-written loops.
// It never busy-spins, overflows a delay or ignores cancellation.
// It retries no error that cannot succeed, and honours Retry-After within bounds.
// Budgets and throttling keep retries from multiplying an outage.
//
// # The retry engine
//
// Every retry decision in rebound is made here; other packages ask and act.
//
//   - Policy is capped exponential backoff with jitter. The zero Policy is valid.
//   - Retrier is a Policy plus options, checked once. Do runs a retry loop.
//     Retry is the one-call form.
//   - Schedule is one loop's state, for loops that run themselves
//     (a heap scheduler, a simulator). Time is passed in (docs/engine.md).
//   - RetryBudget and AdaptiveThrottle limit retries across loops that share them.
//     Breaker plugs in a circuit breaker such as gobreaker's.
//   - NewBackOff builds a cenkalti/backoff BackOff from a Policy.
//
// # A loop by hand
//
// A Retrier's NewSchedule starts one loop. Each Admit returns an Attempt and
// a Decision; each Attempt's Done returns a Decision. Read a Decision so:
// Stop ends the loop with Err (nil after a success); a Delay above 0 means
// wait, then Admit again; Delay 0 from Admit means make the attempt now.
// A loop that stops waiting calls Cancel.
//
//	s := r.NewSchedule(time.Now())
//	for {
//		a, d := s.Admit(time.Now())
//		if !d.Stop && d.Delay == 0 { // admitted
//			d = a.Done(call(ctx), time.Now())
//		}
//		if d.Stop {
//			return d.Err
//		}
//		if err := wait(ctx, d.Delay); err != nil {
//			s.Cancel(time.Now())
//			return err
//		}
//	}
//
// # One vocabulary
//
// Every package of rebound follows the same rules (docs/design.md).
//
// Stopping: Close is idempotent and returns when its goroutines are gone.
// What drains also has Shutdown(ctx), like net/http.Server.
//
// Errors: match with errors.Is and errors.As.
// Every *ArgumentError matches ErrInvalidArgument; every "closed" error matches ErrClosed.
// Permanent stops any loop at once; Transient marks an error worth retrying.
// A loop that stops retrying returns a *RetryError.
//
// Options: one Option type per package; an option a constructor does not take is an *ArgumentError naming it.
// A nil option is ignored; a bad value is an *ArgumentError from the constructor.
//
// Observation: every source emits an Event to the Observers of its WithObserver option.
// Metrics and traces come from providers passed as options; nothing is global.
// See docs/observability.md and docs/tracing.md.
//
// Time: functions that decide take the time as an argument.
// Retry and Retrier.Do read time.Now; every wait selects on its context.
//
// Concurrency: Policy is a value; Retrier, RetryBudget and AdaptiveThrottle are safe for concurrent use.
// A Schedule and a BackOff belong to one loop.
package rebound
