package failback

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestBreakWithPolicyLimiterIsNoThrottle: WithPolicy accepts
// rebound.WithLimiter, which docs/failback.md does not list, and the
// invoker's code says its Retrier has none. A retry that waits for a
// limiter token is then reported as a throttle rejection: Stats.Throttled
// counts it and the call's error becomes rebound.ErrThrottled, though no
// throttle was given. Correct: New refuses an option failback does not
// apply (an *rebound.ArgumentError naming WithPolicy), or a token wait is
// a wait, never a rejection.
func TestBreakWithPolicyLimiterIsNoThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := rate.NewLimiter(rate.Every(time.Minute), 1)
		lim.Allow() // the one token is gone: the first retry waits about a minute
		p := newProvider("a:1", downUntil(30*time.Second))
		rec := newRecorder()
		f, err := New(cluster.NewStaticDirectory(p), withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithLimiter(lim), rebound.WithMaxAttempts(5)))
		if err != nil {
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("New = %v; a refusal must match rebound.ErrInvalidArgument", err)
			}
			return // refused: the correct behaviour
		}
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke = %v, want nil (queued)", err)
		}
		time.Sleep(5 * time.Minute)
		mustClose(t, f)
		s := f.Stats()
		if s.Throttled != 0 {
			t.Errorf("Stats.Throttled = %d with no throttle given: a limiter's token wait was counted as a throttle rejection", s.Throttled)
		}
		for _, tk := range rec.get("retried") {
			if errors.Is(tk.Err, rebound.ErrThrottled) {
				t.Errorf("a retry event reports %v with no throttle given", tk.Err)
				break
			}
		}
	})
}

// noBreaker is a rebound.Breaker that refuses every attempt.
type noBreaker struct{}

func (noBreaker) Allow() (func(error), error) { return nil, errors.New("open") }

// TestBreakWithPolicyBreakerIsNoThrottle: WithPolicy accepts
// rebound.WithBreaker, which docs/failback.md does not list. A retry the
// breaker refuses is reported as a throttle rejection (Stats.Throttled,
// rebound.ErrThrottled), though no throttle was given and the refusal
// matches rebound.ErrBreakerOpen. Correct: New refuses the option, or the
// refusal is reported as the breaker's.
func TestBreakWithPolicyBreakerIsNoThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newProvider("a:1", alwaysFail(errRefused))
		f, err := New(cluster.NewStaticDirectory(p),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithBreaker(noBreaker{}), rebound.WithMaxAttempts(3)))
		if err != nil {
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("New = %v; a refusal must match rebound.ErrInvalidArgument", err)
			}
			return
		}
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke = %v, want nil (queued)", err)
		}
		time.Sleep(time.Minute)
		mustClose(t, f)
		if s := f.Stats(); s.Throttled != 0 {
			t.Errorf("Stats.Throttled = %d with no throttle given: breaker refusals were counted as throttle rejections", s.Throttled)
		}
	})
}

// countingBreaker admits every attempt and counts the admissions and
// their reports.
type countingBreaker struct {
	mu            chan struct{}
	allowed, done int
}

func newCountingBreaker() *countingBreaker {
	return &countingBreaker{mu: make(chan struct{}, 1)}
}

func (b *countingBreaker) Allow() (func(error), error) {
	b.mu <- struct{}{}
	b.allowed++
	<-b.mu
	return func(error) {
		b.mu <- struct{}{}
		b.done++
		<-b.mu
	}, nil
}

func (b *countingBreaker) counts() (int, int) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.allowed, b.done
}

// TestBreakWithPolicyBreakerDoneOnce: with rebound.WithBreaker in
// WithPolicy (accepted today), a retry that panics is never reported to
// the breaker: its done is not called, so a half-open breaker would keep
// the probe counted for good (rebound's own Retrier.Do reports a panic as
// a failure). Correct: every admission's done is called exactly once, or
// New refuses the option.
func TestBreakWithPolicyBreakerDoneOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newCountingBreaker()
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if c.first {
				return nil, errRefused
			}
			panic("provider bug")
		})
		f, err := New(cluster.NewStaticDirectory(p),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithBreaker(b), rebound.WithMaxAttempts(3)))
		if err != nil {
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("New = %v; a refusal must match rebound.ErrInvalidArgument", err)
			}
			return
		}
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke = %v, want nil (queued)", err)
		}
		time.Sleep(time.Minute)
		mustClose(t, f)
		if allowed, done := b.counts(); allowed != done {
			t.Errorf("the breaker admitted %d attempts and heard the end of %d: an admission was never reported", allowed, done)
		}
	})
}
