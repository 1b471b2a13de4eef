package rebound

import (
	"context"
	"errors"
)

// Retry calls op until it succeeds, returns an error that is not retried,
// the policy is exhausted, or ctx is done. Every attempt receives ctx, and
// every wait between attempts ends when ctx is done.
//
// It returns nil when an attempt succeeds; the error itself (unwrapped from
// Permanent) when it is marked Permanent or WithClassifier does not call it
// transient; a *RetryError when it stops retrying, whose Reason is
// ErrExhausted, ErrBudgetExhausted or ctx's error, and which errors.Is
// matches with both the reason and the last attempt's error; and an
// *ArgumentError for a nil ctx or op, an invalid policy or a bad option,
// without calling op. Retry compiles its options on every call: on a hot
// path build a Retrier once and call Do. Edge cases (a deadline shorter
// than the next wait, throttled attempts, ctx done before the first
// attempt) are in docs/guide.md.
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
			return r.loop(ctx, op, r.c.now(), 0, err, nil)
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
