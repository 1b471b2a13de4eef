package rebound_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

var errBoom = errors.New("boom")

// fast is a short policy for loop tests.
var fast = rebound.Policy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}

func TestRetrySucceedsFirstTime(t *testing.T) {
	calls := 0
	err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { calls++; return nil })
	if err != nil || calls != 1 {
		t.Fatalf("Retry = %v after %d calls, want nil after 1", err, calls)
	}
}

func TestRetryMaxAttemptsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := rebound.Retry(t.Context(), fast, func(context.Context) error { calls++; return errBoom }, rebound.WithMaxAttempts(4))
		if calls != 4 {
			t.Fatalf("op called %d times, want 4", calls)
		}
		var re *rebound.RetryError
		if !errors.As(err, &re) || re.Attempts != 4 {
			t.Fatalf("Retry = %v, want *RetryError with 4 attempts", err)
		}
		if !errors.Is(err, rebound.ErrExhausted) || !errors.Is(err, errBoom) {
			t.Fatalf("Retry = %v, want both ErrExhausted and the op error", err)
		}
		if !strings.Contains(err.Error(), "4 attempts") {
			t.Fatalf("error %q does not say how many attempts", err)
		}
	})
}

func TestRetryEventuallySucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			calls++
			if calls < 5 {
				return errBoom
			}
			return nil
		})
		if err != nil || calls != 5 {
			t.Fatalf("Retry = %v after %d calls, want nil after 5", err, calls)
		}
	})
}

func TestPermanentStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, after := range []int{1, 3} {
			calls := 0
			err := rebound.Retry(t.Context(), fast, func(context.Context) error {
				calls++
				if calls == after {
					return rebound.Permanent(errBoom)
				}
				return errors.New("transient")
			})
			if calls != after || err != errBoom {
				t.Fatalf("Retry = %v after %d calls, want errBoom unchanged after %d", err, calls, after)
			}
		}
		// Compatible with cenkalti/backoff's own Permanent, and through wrapping.
		calls := 0
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			calls++
			return backoff.Permanent(errBoom)
		})
		if calls != 1 || !errors.Is(err, errBoom) {
			t.Fatalf("backoff.Permanent: Retry = %v after %d calls", err, calls)
		}
		if !rebound.IsPermanent(errors.Join(errors.New("x"), rebound.Permanent(errBoom))) {
			t.Fatal("IsPermanent does not see through wrapping")
		}
		if rebound.Permanent(nil) != nil {
			t.Fatal("Permanent(nil) != nil")
		}
	})
}

// An op classifies its own errors: one it marks Permanent comes back
// unchanged, the others are retried.
func TestClassifier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errTransient := errors.New("transient")
		transient := func(err error) bool { return errors.Is(err, errTransient) }
		calls := 0
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			calls++
			err := errBoom
			if calls < 3 {
				err = errTransient
			}
			if !transient(err) {
				return rebound.Permanent(err)
			}
			return err
		})
		if calls != 3 || err != errBoom {
			t.Fatalf("Retry = %v after %d calls, want errBoom after 3", err, calls)
		}
	})
}

func TestCancelDuringLongWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		p := rebound.Policy{Initial: 30 * time.Second, Max: 30 * time.Second, Jitter: rebound.NoJitter}
		done := make(chan error)
		calls := 0
		go func() {
			done <- rebound.Retry(ctx, p, func(context.Context) error { calls++; return errBoom })
		}()
		synctest.Wait() // first attempt failed, the loop now waits 30 s
		start := time.Now()
		cancel()
		err := <-done
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Retry returned %v of virtual time after cancel, want at once", waited)
		}
		if calls != 1 {
			t.Fatalf("op called %d times, want 1", calls)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Fatalf("Retry = %v, want both context.Canceled and the op error", err)
		}
	})
}

func TestAttemptReceivesContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
		done := make(chan error)
		go func() {
			done <- rebound.Retry(ctx, fast, func(ctx context.Context) error {
				if ctx.Value(key{}) != "v" {
					return rebound.Permanent(errors.New("attempt did not get the caller's ctx"))
				}
				<-ctx.Done() // an in-flight attempt is cancelled too
				return ctx.Err()
			})
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Retry = %v, want context.Canceled", err)
		}
	})
}

func TestDeadlineTooCloseReturnsImmediately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		p := rebound.Policy{Initial: 10 * time.Second, Jitter: rebound.NoJitter}
		err := rebound.Retry(ctx, p, func(context.Context) error { return errBoom })
		if time.Since(start) != 0 {
			t.Fatalf("Retry slept %v through a deadline it could not meet", time.Since(start))
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBoom) {
			t.Fatalf("Retry = %v, want DeadlineExceeded and the op error", err)
		}
	})
}

func TestRetryAfterRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var times []time.Duration
		start := time.Now()
		calls := 0
		var delays []time.Duration
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			times = append(times, time.Since(start))
			calls++
			if calls == 1 {
				return rebound.RetryAfter(7*time.Second, errBoom)
			}
			if calls == 2 {
				return rebound.RetryAfter(time.Millisecond, errBoom) // shorter than the formula: formula wins
			}
			return nil
		}, rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind == rebound.EventRetry {
				delays = append(delays, e.Delay)
			}
		})))
		if err != nil {
			t.Fatal(err)
		}
		if times[1] != 7*time.Second {
			t.Fatalf("second attempt at %v, want 7s (Retry-After)", times[1])
		}
		if delays[0] != 7*time.Second || delays[1] < rebound.MinDelay || delays[1] > fast.Ceiling(1) {
			t.Fatalf("notified delays %v", delays)
		}
		if d, ok := rebound.RetryAfterDelay(errors.Join(rebound.RetryAfter(time.Minute, errBoom))); !ok || d != time.Minute {
			t.Fatalf("RetryAfterDelay = %v, %v", d, ok)
		}
	})
}

func TestRetryAfterBeyondMaxElapsedSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			calls++
			return rebound.RetryAfter(2*time.Minute, errBoom)
		}, rebound.WithMaxElapsed(time.Minute))
		if calls != 1 || time.Since(start) != 0 {
			t.Fatalf("calls %d, waited %v", calls, time.Since(start))
		}
		if !errors.Is(err, rebound.ErrExhausted) || !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "retry after 2m0s") {
			t.Fatalf("Retry = %v, want ErrExhausted naming the Retry-After", err)
		}
	})
}

func TestMaxElapsedFromStartOfCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Hour) // the process has been up for a while: irrelevant
		p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
		start := time.Now()
		var last time.Duration
		calls := 0
		err := rebound.Retry(t.Context(), p, func(context.Context) error {
			calls++
			last = time.Since(start)
			return errBoom
		}, rebound.WithMaxElapsed(10*time.Second))
		if !errors.Is(err, rebound.ErrExhausted) {
			t.Fatalf("Retry = %v", err)
		}
		if calls != 11 || last != 10*time.Second {
			t.Fatalf("%d calls, last at %v; want 11 calls, last at 10s", calls, last)
		}
	})
}

func TestObserverSeesEveryRetryWithActualDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []rebound.Event
		var attemptTimes []time.Time
		_ = rebound.Retry(t.Context(), fast, func(context.Context) error {
			attemptTimes = append(attemptTimes, time.Now())
			return errBoom
		}, rebound.WithMaxAttempts(6), rebound.WithObserver(rebound.Hooks{Retried: func(e rebound.Event) { events = append(events, e) },
			GaveUp: func(e rebound.Event) { events = append(events, e) }}))
		if len(events) != 6 { // 5 retries + give-up
			t.Fatalf("%d events, want 6", len(events))
		}
		for i, e := range events[:5] {
			if e.Kind != rebound.EventRetry || e.Attempt != i+1 || !errors.Is(e.Err, errBoom) {
				t.Fatalf("event %d = %+v", i, e)
			}
			if waited := attemptTimes[i+1].Sub(attemptTimes[i]); waited != e.Delay {
				t.Fatalf("event %d: notified delay %v, actually waited %v", i, e.Delay, waited)
			}
		}
		if g := events[5]; g.Kind != rebound.EventGiveUp || g.Attempt != 6 || !errors.Is(g.Err, rebound.ErrExhausted) {
			t.Fatalf("give-up event = %+v", g)
		}
	})
}

func TestObserverSeesSuccessAfterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got rebound.Event
		calls := 0
		_ = rebound.Retry(t.Context(), rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}, func(context.Context) error {
			calls++
			if calls < 3 {
				return errBoom
			}
			return nil
		}, rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			if e.Kind == rebound.EventAttempt {
				got = e
			}
		})))
		if got.Kind != rebound.EventAttempt || got.Err != nil || got.Attempt != 3 || got.Elapsed != 3*time.Second {
			t.Fatalf("success event = %+v, want attempt 3 after 3s", got)
		}
	})
}

func TestLimiterCapsGlobalRetryRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const loops = 100
		lim := rate.NewLimiter(rate.Limit(10), 1) // 10 retries per second for everyone
		var mu sync.Mutex
		var retryTimes []time.Duration
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < loops; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				calls := 0
				err := rebound.Retry(t.Context(), rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
					func(context.Context) error {
						calls++
						if calls > 1 {
							mu.Lock()
							retryTimes = append(retryTimes, time.Since(start))
							mu.Unlock()
						}
						if calls < 3 {
							return errBoom
						}
						return nil
					}, rebound.WithLimiter(lim))
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(retryTimes) != 2*loops {
			t.Fatalf("%d retries, want %d", len(retryTimes), 2*loops)
		}
		// In any 1 s window at most rate+burst retries.
		for _, a := range retryTimes {
			n := 0
			for _, b := range retryTimes {
				if b >= a && b < a+time.Second {
					n++
				}
			}
			if n > 11 {
				t.Fatalf("%d retries within 1s of %v: limiter not shared", n, a)
			}
		}
		if elapsed := time.Since(start); elapsed < 19*time.Second {
			t.Fatalf("200 retries at 10/s done in %v", elapsed)
		}
	})
}

func TestFirstAttemptSkipsLimiter(t *testing.T) {
	lim := rate.NewLimiter(0, 1) // rate 0: once its token is taken, it would block forever
	lim.Allow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rebound.Retry(ctx, rebound.Policy{}, func(context.Context) error { return nil }, rebound.WithLimiter(lim)); err != nil {
		t.Fatalf("first attempt waited on the limiter: %v", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	var called atomic.Bool
	op := func(context.Context) error { called.Store(true); return nil }
	//lint:ignore SA1012 testing the nil-context error on purpose
	if err := rebound.Retry(nil, rebound.Policy{}, op); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "ctx") {
		t.Fatalf("nil ctx: %v", err)
	}
	if err := rebound.Retry(context.Background(), rebound.Policy{}, nil); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "op") {
		t.Fatalf("nil op: %v", err)
	}
	if err := rebound.Retry(context.Background(), rebound.Policy{Multiplier: 0.1}, op); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Fatalf("invalid policy: %v", err)
	}
	if called.Load() {
		t.Fatal("op called despite invalid arguments")
	}
}

type fakeTimer struct {
	c       chan time.Time
	started []time.Duration
}

func (f *fakeTimer) Start(d time.Duration) {
	f.started = append(f.started, d)
	f.c <- time.Time{} // fire at once: the fake clock jumps
}
func (f *fakeTimer) Stop()               {}
func (f *fakeTimer) C() <-chan time.Time { return f.c }

func TestTimerSeam(t *testing.T) {
	ft := &fakeTimer{c: make(chan time.Time, 1)}
	p := rebound.Policy{Initial: time.Hour, Max: time.Hour, Jitter: rebound.NoJitter}
	err := rebound.Retry(context.Background(), p, func(context.Context) error { return errBoom },
		rebound.WithTimer(func() backoff.Timer { return ft }), rebound.WithMaxAttempts(3))
	if !errors.Is(err, rebound.ErrExhausted) {
		t.Fatalf("Retry = %v", err)
	}
	if len(ft.started) != 2 || ft.started[0] != time.Hour {
		t.Fatalf("fake timer started with %v, want two 1h waits", ft.started)
	}
}

func BenchmarkRetrySuccess(b *testing.B) {
	ctx := context.Background()
	var n int
	op := func(context.Context) error { n++; return nil }
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := op(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rebound.Retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rebound.Retry(ctx, rebound.Policy{}, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rebound.Retry+observer", func(b *testing.B) {
		hook := rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {}))
		b.ReportAllocs()
		for b.Loop() {
			if err := rebound.Retry(ctx, rebound.Policy{}, op, hook); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rebound.Retrier", func(b *testing.B) {
		r, _ := rebound.NewRetrier(rebound.Policy{})
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Do(ctx, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rebound.Retrier+hooks", func(b *testing.B) {
		ev := func(rebound.Event) {}
		r, _ := rebound.NewRetrier(rebound.Policy{},
			rebound.WithObserver(rebound.Hooks{Attempted: ev, Retried: ev, Recovered: ev, GaveUp: ev}),
			rebound.WithObserver(rebound.ObserverFunc(ev)))
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Do(ctx, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backoff.Retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := backoff.Retry(func() error { return op(ctx) }, backoff.NewExponentialBackOff()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScheduleNext is the step function: one failed attempt's decision.
func BenchmarkScheduleNext(b *testing.B) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		err  error
		opts []rebound.Option
	}{
		{"plain", errBoom, nil},
		{"retry-after", rebound.RetryAfter(time.Second, errBoom), nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r, _ := rebound.NewRetrier(rebound.Policy{}, tc.opts...)
			s := newLoop(r, now)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%64 == 0 {
					s.Reset(now)
				}
				if _, stop := s.next(tc.err, now); stop != nil {
					b.Fatal(stop)
				}
			}
		})
	}
}
