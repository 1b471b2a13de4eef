package rebound

import (
	"context"
	"errors"
)

// Retry calls op until it succeeds, returns a permanent or non-transient
// error, the policy is exhausted, or ctx is done. It runs on the same step
// function as every loop of rebound (Schedule), with a fresh Schedule per
// call; for a hot path, build a Retrier once and call its Do (Retry with
// options compiles them on every call).
//
// Every attempt receives ctx, so cancelling ctx also cancels an attempt in
// flight; the wait between attempts ends at once when ctx is done. Retry
// returns:
//
//   - nil when an attempt succeeds;
//   - the error unchanged (unwrapped from Permanent) when an attempt returns
//     an error marked Permanent or one the classifier (WithClassifier) does
//     not call transient;
//   - a *RetryError when it stops retrying a transient error, or does not
//     start: Reason is ErrExhausted (MaxAttempts, MaxElapsed, a Retry-After
//     beyond MaxElapsed, a limiter token after MaxElapsed),
//     ErrBudgetExhausted (WithBudget refused the retry), ctx.Err() (ctx
//     done, also before the first
//     attempt: then Attempts is 0 and op was not called), or an error
//     wrapping context.DeadlineExceeded when the next wait would end after
//     ctx's deadline (Retry returns at once instead of sleeping through
//     it); errors.Is holds for both the reason and the last attempt's
//     error;
//   - an *ArgumentError (matching ErrInvalidArgument) for a nil ctx or op,
//     an invalid policy (it also matches ErrInvalidPolicy) or a bad option
//     value, without calling op.
//
// With WithThrottle, an attempt the throttle rejects locally is not made
// (op is not called): it counts as a failed attempt whose error is
// ErrThrottled, and the loop backs off and asks again; a loop that runs
// out of attempts or time that way returns a *RetryError with Reason
// ErrExhausted and Last ErrThrottled (errors.Is holds for both).
//
// The first attempt runs at once; it neither waits for the limiter nor
// allocates when it succeeds and no option is given.
func Retry(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Retry", Arg: "ctx", Reason: "must not be nil"}
	}
	if op == nil {
		return &ArgumentError{Func: "rebound.Retry", Arg: "op", Reason: "must not be nil"}
	}
	if len(opts) == 0 {
		// Fast path: nothing to compile, no allocation when op succeeds.
		if !p.validFast() {
			if err := p.Validate(); err != nil {
				return &ArgumentError{Func: "rebound.Retry", Arg: "p", Reason: "breaks a Policy rule", Err: err}
			}
		}
		if err := ctx.Err(); err != nil {
			return &RetryError{Reason: err}
		}
		if p.MaxElapsed == 0 {
			err := op(ctx)
			if err == nil {
				return nil
			}
			r := &Retrier{p: p.Normalized()}
			return r.loop(ctx, op, r.c.now(), err, nil)
		}
	}
	r := &Retrier{}
	if err := r.init("rebound.Retry", p, opts); err != nil {
		return err
	}
	return r.do(ctx, op)
}

// joinArgErrors joins several option errors; errors.As finds the first
// *ArgumentError.
func joinArgErrors(errs []error) error { return errors.Join(errs...) }
