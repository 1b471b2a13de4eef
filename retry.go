package rebound

import (
	"context"
	"time"

	"github.com/rebound-go/rebound/internal/admit"
)

// Retry calls op until it succeeds, returns an error that is not retried,
// the policy is exhausted, or ctx is done. Every attempt receives ctx, and
// every wait between attempts ends when ctx is done.
//
// It returns nil when an attempt succeeds; the error itself (unwrapped from
// Permanent) when it is marked Permanent; a *RetryError when it stops retrying, whose Reason is
// ErrExhausted, ErrBudgetExhausted or ctx's error, and which errors.Is
// matches with both the reason and the last attempt's error; and an
// *ArgumentError for a nil ctx or op, an invalid policy or a bad option,
// without calling op. Options that act only on failures or only observe
// (WithObserver, WithMeterProvider) cost nothing when the first attempt
// succeeds; the others are compiled on every call: on a hot path build a
// Retrier once and call Do. Edge cases (a deadline shorter than the next
// wait, throttled attempts, ctx done before the first attempt) are in
// docs/guide.md.
func Retry(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) error {
	if ctx == nil {
		return &ArgumentError{Func: "rebound.Retry", Arg: "ctx", Reason: "must not be nil"}
	}
	if op == nil {
		return &ArgumentError{Func: "rebound.Retry", Arg: "op", Reason: "must not be nil"}
	}
	meter, me, only := observersOnly(opts)
	if !only {
		r := &Retrier{}
		if err := r.compile("rebound.Retry", p, opts); err != nil {
			return err
		}
		return r.do(ctx, op)
	}
	// Fast path: nothing acts before the first attempt, and its success
	// needs nothing compiled; the options are compiled if it fails.
	if !p.validFast() {
		if err := p.validate(); err != nil {
			return &ArgumentError{Func: "rebound.Retry", Arg: "p", Reason: "breaks a Policy rule", Err: err}
		}
	}
	if err := ctx.Err(); err != nil {
		return &RetryError{Reason: err}
	}
	var start time.Time
	if me > 0 {
		start = time.Now() // no clock option here: the loop's clock is time.Now
	}
	err := op(ctx)
	if err == nil {
		if len(opts) > 0 {
			firstSucceeded(opts, meter)
		}
		return nil
	}
	r := &Retrier{}
	if ierr := r.compile("rebound.Retry", p, opts); ierr != nil {
		return ierr // not reached: p is valid, and these options have no errors
	}
	if me == 0 {
		start = r.c.now()
	}
	return r.loop(ctx, op, start, 0, err, nil)
}

// observersOnly reports whether opts hold nothing but observers, meters,
// valid limits and nil options (nothing that acts on a first attempt). It
// returns the last meter and MaxElapsed, the ones that apply.
func observersOnly(opts []Option) (*retryMeter, time.Duration, bool) {
	var m *retryMeter
	var me time.Duration
	for _, o := range opts {
		switch v := o.(type) {
		case *retryMeter:
			m = v
		case maxElapsed:
			if v < 0 {
				return nil, 0, false
			}
			me = time.Duration(v)
		case maxAttempts:
			if v < 0 {
				return nil, 0, false
			}
		case nil, *observerOption:
		default:
			return nil, 0, false
		}
	}
	return m, me, true
}

// firstSucceeded reports a first attempt's success to m, the meter that
// applies, then to the observers of opts in order (observersOnly), as the
// compiled options would.
func firstSucceeded(opts []Option, m *retryMeter) {
	if m != nil {
		m.on[EventAttempt](Event{Kind: EventAttempt, Attempt: 1})
	}
	for _, o := range opts {
		if v, ok := o.(*observerOption); ok && v.l[EventAttempt] != nil {
			v.l[EventAttempt](Event{Kind: EventAttempt, Attempt: 1})
		}
	}
}

// The options of internal/admit, for rebound's own layers.
func init() {
	admit.First = func(g admit.Gate) any { return withAdmission(kindFirst, g) }
	admit.Refuse = func(g admit.Gate, r admit.Refusal) any { return withRefusal(g, r) }
	admit.Seed = func(seed uint64) any { return withSeed(seed) }
	admit.Engine = engineOf
	admit.Unobserved = func() any { return unobserved }
	admit.Begin = func(r any, now time.Time) error { return r.(*Retrier).beginFirst(now) }
	admit.Record = func(r any, err error, now time.Time) { r.(*Retrier).recordFirst(err, now) }
	admit.FirstDelay = func(s any) time.Duration { return s.(*Schedule).firstDelay() }
	admit.Attempts = func(s any) int { return s.(*Schedule).attempts }
	admit.Normalized = func(p any) any { return p.(Policy).normalized() }
	admit.Lookup = func(s any, now time.Time) (bool, time.Duration, error, error) {
		_, d := s.(*Schedule).lookup(now)
		return d.Stop, d.Delay, d.Reason, d.Err
	}
}

// engineOf returns what opts, a []Option, set (admit.Engine).
func engineOf(opts any) admit.Settings {
	os, _ := opts.([]Option)
	c := newConfig(os)
	s := admit.Settings{Budget: c.budget != nil, Throttle: c.throttle != nil,
		Limiter: c.limiter != nil, Breaker: c.breaker != nil}
	if c.meter != nil {
		s.MeterProvider, s.MeterAttrs = c.meter.mp, c.meter.attrs
	}
	if c.tracer != nil {
		s.Tracer = c.tracer.tr
	}
	for _, o := range os {
		if v, ok := o.(*observerOption); ok {
			s.Observers = append(s.Observers, v.o)
		}
	}
	return s
}

// unobserved drops the observers, meter and tracer set before it.
var unobserved Option = optionFunc(func(c *config) { c.observers, c.meter, c.tracer = nil, nil, nil })
