package rebound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry calls op until it succeeds, returns a permanent or non-transient
// error, the policy is exhausted, or ctx is done. The loop itself is
// cenkalti/backoff's RetryNotifyWithTimer over a BackOff built from p (one
// per call, never shared) and wrapped with ctx.
//
// Every attempt receives ctx, so cancelling ctx also cancels an attempt in
// flight; the wait between attempts ends at once when ctx is done. Retry
// returns:
//
//   - nil when an attempt succeeds;
//   - the error unchanged (unwrapped from Permanent) when an attempt returns
//     an error marked Permanent or one the classifier (WithClassifier) does
//     not call transient;
//   - a *RetryError when it stops retrying a transient error: Reason is
//     ErrExhausted (MaxAttempts, MaxElapsed, a Retry-After beyond
//     MaxElapsed), ctx.Err() (ctx done), or an error wrapping
//     context.DeadlineExceeded when the next wait would end after ctx's
//     deadline (Retry returns at once instead of sleeping through it);
//     errors.Is holds for both the reason and the last attempt's error;
//   - an error wrapping ErrInvalidArgument for a nil ctx or op, and
//     p.Validate()'s error for an invalid policy, without calling op.
//
// The first attempt runs at once; it neither waits for the limiter nor
// allocates when it succeeds and no option is given.
func Retry(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return fmt.Errorf("%w: Retry: ctx is nil", ErrInvalidArgument)
	}
	if op == nil {
		return fmt.Errorf("%w: Retry: op is nil", ErrInvalidArgument)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	var c *config
	if len(opts) > 0 {
		c = newConfig(opts)
	}
	var start time.Time
	if c != nil || p.MaxElapsed > 0 {
		start = c.now()
	}
	err := op(ctx)
	if err == nil {
		if c != nil && len(c.notify) > 0 {
			c.emit(Event{Kind: EventSuccess, Attempt: 1, Elapsed: c.now().Sub(start)})
		}
		return nil
	}
	if c == nil {
		c = &config{}
	}
	return retryLoop(ctx, p, op, c, start, err)
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c
}

// now reads the configured clock; it works on a nil *config.
func (c *config) now() time.Time {
	if c != nil && c.clock != nil {
		return c.clock.Now()
	}
	return time.Now()
}

func (c *config) emit(e Event) {
	for _, fn := range c.notify {
		fn(e)
	}
}

// loopState is shared by the operation closure and the BackOff wrapper of
// one Retry call (one goroutine: no locking needed).
type loopState struct {
	attempts int
	last     error // the last attempt's error
	final    bool  // the loop ended on the op's own permanent/non-transient error
	reason   error // why the loop stopped retrying a transient error
}

func retryLoop(ctx context.Context, p Policy, op func(context.Context) error, c *config, start time.Time, firstErr error) error {
	st := &loopState{attempts: 1, last: firstErr}
	giveUp := func(err error) error {
		c.emit(Event{Kind: EventGiveUp, Attempt: st.attempts, Err: err, Elapsed: c.now().Sub(start)})
		return err
	}
	if perm := asPermanent(firstErr); perm != nil {
		return giveUp(perm.Err)
	}
	if c.transient != nil && !c.transient(firstErr) {
		return giveUp(firstErr)
	}

	pb := newPolicyBackOff(p, c)
	pb.start = start
	rb := &retryBackOff{inner: pb, ctx: ctx, st: st, c: c, start: start}

	first := true
	operation := func() error {
		if first {
			// The first attempt already ran in Retry's fast path.
			first = false
			return firstErr
		}
		if c.limiter != nil {
			if lerr := c.limiter.Wait(ctx); lerr != nil {
				if cerr := ctx.Err(); cerr != nil {
					st.reason = cerr
				} else {
					st.reason = fmt.Errorf("%w: retry limiter: %w", context.DeadlineExceeded, lerr)
				}
				return backoff.Permanent(lerr)
			}
		}
		st.attempts++
		err := op(ctx)
		if err == nil {
			return nil
		}
		st.last = err
		if asPermanent(err) != nil {
			st.final = true
			return err
		}
		if c.transient != nil && !c.transient(err) {
			st.final = true
			return backoff.Permanent(err)
		}
		return err
	}
	notify := func(err error, d time.Duration) {
		if len(c.notify) > 0 {
			c.emit(Event{Kind: EventRetry, Attempt: st.attempts, Err: err, Delay: d, Elapsed: c.now().Sub(start)})
		}
	}
	var timer backoff.Timer
	if c.newTimer != nil {
		timer = c.newTimer()
	}

	err := backoff.RetryNotifyWithTimer(operation, backoff.WithContext(rb, ctx), notify, timer)
	switch {
	case err == nil:
		if len(c.notify) > 0 {
			c.emit(Event{Kind: EventSuccess, Attempt: st.attempts, Elapsed: c.now().Sub(start)})
		}
		return nil
	case st.final:
		return giveUp(err)
	case st.reason == nil && ctx.Err() != nil:
		st.reason = ctx.Err()
	case st.reason == nil:
		// Defensive: the BackOff stopped without saying why.
		st.reason = ErrExhausted
	}
	return giveUp(&RetryError{Attempts: st.attempts, Last: st.last, Reason: st.reason})
}

func asPermanent(err error) *backoff.PermanentError {
	p, _ := errors.AsType[*backoff.PermanentError](err)
	return p
}

// retryBackOff adds to the policy's BackOff what only a Retry call knows:
// the last error's Retry-After and the context's deadline.
type retryBackOff struct {
	inner *policyBackOff
	ctx   context.Context
	st    *loopState
	c     *config
	start time.Time
}

// Reset restarts the delay sequence but keeps the start of the call as the
// origin of MaxElapsed (the loop resets once before the first wait).
func (r *retryBackOff) Reset() {
	r.inner.Reset()
	r.inner.start = r.start
}

func (r *retryBackOff) NextBackOff() time.Duration {
	d := r.inner.NextBackOff()
	if d == backoff.Stop {
		r.st.reason = ErrExhausted
		return backoff.Stop
	}
	if ra, ok := RetryAfterDelay(r.st.last); ok && ra > d {
		if me := r.inner.p.MaxElapsed; me > 0 {
			if elapsed := r.c.now().Sub(r.start); elapsed+ra > me {
				r.st.reason = fmt.Errorf("%w: server asked to retry after %v, beyond MaxElapsed %v",
					ErrExhausted, ra, me)
				return backoff.Stop
			}
		}
		d = ra
	}
	if dl, ok := r.ctx.Deadline(); ok && !time.Now().Add(d).Before(dl) {
		r.st.reason = fmt.Errorf("%w: next attempt in %v would start after the context deadline",
			context.DeadlineExceeded, d)
		return backoff.Stop
	}
	return d
}
