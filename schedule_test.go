package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustRetrier(t testing.TB, p rebound.Policy, opts ...rebound.Option) *rebound.Retrier {
	t.Helper()
	r, err := rebound.NewRetrier(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestScheduleStopsOnPermanentAndClassifier(t *testing.T) {
	errT := errors.New("transient")
	r := mustRetrier(t, fast)
	s := newLoop(r, t0)
	if d, stop := s.next(errT, t0); stop != nil || d < rebound.MinDelay {
		t.Fatalf("Next(transient) = %v, %v", d, stop)
	}
	if _, stop := s.next(rebound.Permanent(errBoom), t0); stop != errBoom {
		t.Fatalf("Next(Permanent(non-transient)) stop = %v, want the error unchanged", stop)
	}
	if _, stop := s.next(rebound.Permanent(errT), t0); stop != errT {
		t.Fatalf("Next(Permanent) stop = %v, want the unwrapped error", stop)
	}
}

func TestScheduleMaxAttemptsAndReset(t *testing.T) {
	s := newLoop(mustRetrier(t, fast, rebound.WithMaxAttempts(3)), t0)
	for i := 1; i <= 2; i++ {
		if _, stop := s.next(errBoom, t0); stop != nil {
			t.Fatalf("failure %d: stop %v", i, stop)
		}
	}
	_, stop := s.next(errBoom, t0)
	var re *rebound.RetryError
	if !errors.As(stop, &re) || re.Attempts != 3 || !errors.Is(stop, rebound.ErrExhausted) || !errors.Is(stop, errBoom) {
		t.Fatalf("third failure: stop = %v", stop)
	}
	if s.Attempts() != 3 {
		t.Fatalf("Attempts = %d", s.Attempts())
	}
	s.Reset(t0.Add(time.Hour))
	if s.Attempts() != 0 || !s.Start().Equal(t0.Add(time.Hour)) {
		t.Fatalf("after Reset: attempts %d, start %v", s.Attempts(), s.Start())
	}
	if _, stop := s.next(errBoom, t0); stop != nil {
		t.Fatalf("after Reset: stop %v", stop)
	}
}

// MaxElapsed bounds the START of the next attempt: now+delay.
func TestScheduleMaxElapsedAtStartOfNextAttempt(t *testing.T) {
	p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
	s := newLoop(mustRetrier(t, p, rebound.WithMaxElapsed(10*time.Second)), t0)
	if d, stop := s.next(errBoom, t0.Add(9*time.Second)); stop != nil || d != time.Second {
		t.Fatalf("attempt at 10s allowed: got %v, %v", d, stop)
	}
	if _, stop := s.next(errBoom, t0.Add(9*time.Second+1)); !errors.Is(stop, rebound.ErrExhausted) {
		t.Fatalf("attempt after 10s: stop = %v, want ErrExhausted", stop)
	}
}

func TestScheduleRetryAfterClampedToMax(t *testing.T) {
	for _, tc := range []struct {
		p    rebound.Policy
		want time.Duration
	}{
		{rebound.Policy{}, 5 * time.Minute},
		{rebound.Policy{MaxRetryAfter: time.Minute}, time.Minute},
		{rebound.Policy{Max: time.Hour}, time.Hour}, // Max above the default cap
	} {
		s := newLoop(mustRetrier(t, tc.p), t0)
		huge := rebound.RetryAfter(4294967295*time.Second, errBoom)
		if d, stop := s.next(huge, t0); stop != nil || d != tc.want {
			t.Fatalf("%+v: Next(Retry-After 136 years) = %v, %v; want %v", tc.p, d, stop, tc.want)
		}
		// A Retry-After below the cap is honoured exactly.
		if d, _ := s.next(rebound.RetryAfter(7*time.Second, errBoom), t0); d < 7*time.Second {
			t.Fatalf("Retry-After 7s: delay %v", d)
		}
	}
	// Beyond MaxElapsed: stop, saying so.
	s := newLoop(mustRetrier(t, rebound.Policy{}, rebound.WithMaxElapsed(time.Minute)), t0)
	_, stop := s.next(rebound.RetryAfter(2*time.Minute, errBoom), t0)
	if !errors.Is(stop, rebound.ErrExhausted) || !strings.Contains(stop.Error(), "retry after 2m0s, beyond MaxElapsed 1m0s") {
		t.Fatalf("stop = %v", stop)
	}
}

func TestScheduleLimiterAdmitInVirtualTime(t *testing.T) {
	lim := rate.NewLimiter(1, 1) // 1 token per second
	r := mustRetrier(t, fast, rebound.WithLimiter(lim))
	a, b := newLoop(r, t0), newLoop(r, t0)
	due := t0.Add(time.Second)
	if w, stop := a.admit(due); stop != nil || w != 0 {
		t.Fatalf("a: Admit = %v, %v; want the burst token now", w, stop)
	}
	w, stop := b.admit(due)
	if stop != nil || w != time.Second || b.limiterWait() != time.Second {
		t.Fatalf("b: Admit = %v, %v; want 1s", w, stop)
	}
	// Admit again halfway: the same token, half the wait.
	if w, _ := b.admit(due.Add(500 * time.Millisecond)); w != 500*time.Millisecond {
		t.Fatalf("b: second Admit = %v, want the remaining 500ms", w)
	}
	// b stops: its token comes back, so a third loop gets it.
	b.Cancel(due)
	c := newLoop(r, t0)
	if w, _ := c.admit(due); w != time.Second {
		t.Fatalf("c: Admit = %v, want 1s (b's cancelled token)", w)
	}
}

func TestScheduleAdmitPastMaxElapsedStops(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Minute), 1)
	lim.AllowN(t0, 1)
	s := newLoop(mustRetrier(t, fast, rebound.WithMaxElapsed(10*time.Second), rebound.WithLimiter(lim)), t0)
	_, stop := s.admit(t0.Add(time.Second))
	if !errors.Is(stop, rebound.ErrExhausted) || !strings.Contains(stop.Error(), "limiter") {
		t.Fatalf("Admit = %v, want ErrExhausted naming the limiter", stop)
	}
	// The token was given back.
	if w := lim.ReserveN(t0.Add(time.Second), 1).DelayFrom(t0.Add(time.Second)); w != 59*time.Second {
		t.Fatalf("next token in %v, want 59s (the cancelled one)", w)
	}
}

func TestScheduleFirstDelay(t *testing.T) {
	p := rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}
	s := newLoop(mustRetrier(t, p), t0)
	if d := s.FirstDelay(); d != time.Second {
		t.Fatalf("FirstDelay = %v", d)
	}
	if d, _ := s.next(errBoom, t0); d != time.Second {
		t.Fatalf("Next after FirstDelay = %v: the sequence moved", d)
	}
}

func TestScheduleNextDoesNotAllocate(t *testing.T) {
	s := newLoop(mustRetrier(t, rebound.Policy{}), t0)
	ra := rebound.RetryAfter(time.Second, errBoom)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, stop := s.next(ra, t0); stop != nil {
			t.Fatal(stop)
		}
		if _, stop := s.admit(t0); stop != nil {
			t.Fatal(stop)
		}
	})
	if allocs != 0 {
		t.Fatalf("Next+Admit: %v allocs, want 0", allocs)
	}
}

func TestRetryCancelledContextDoesNotCallOp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	op := func(context.Context) error { called = true; return nil }
	for name, f := range map[string]func() error{
		"Retry":      func() error { return rebound.Retry(ctx, rebound.Policy{}, op) },
		"Retry+opts": func() error { return rebound.Retry(ctx, rebound.Policy{}, op, rebound.WithSeed(1)) },
		"Retrier.Do": func() error { return mustRetrier(t, rebound.Policy{}).Do(ctx, op) },
		"MaxElapsed": func() error { return rebound.Retry(ctx, rebound.Policy{}, op, rebound.WithMaxElapsed(time.Second)) },
	} {
		err := f()
		var re *rebound.RetryError
		if called || !errors.Is(err, context.Canceled) || !errors.As(err, &re) || re.Attempts != 0 {
			t.Fatalf("%s: called %v, err %v", name, called, err)
		}
		if err.Error() != "rebound: not attempted: context canceled" {
			t.Fatalf("%s: %q", name, err)
		}
	}
}

func TestBadLimiterRejectedUpFront(t *testing.T) {
	for name, opt := range map[string]rebound.Option{
		"burst 0": rebound.WithLimiter(rate.NewLimiter(10, 0)),
		"nil":     rebound.WithLimiter(nil),
	} {
		called := false
		err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { called = true; return nil }, opt)
		var ae *rebound.ArgumentError
		if called || !errors.As(err, &ae) || ae.Func != "rebound.WithLimiter" || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Fatalf("%s: Retry = %v (called %v)", name, err, called)
		}
		if _, err := rebound.NewRetrier(rebound.Policy{}, opt); !errors.As(err, &ae) || ae.Func != "rebound.WithLimiter" {
			t.Fatalf("%s: NewRetrier = %v", name, err)
		}
	}
	if !strings.Contains(rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { return nil },
		rebound.WithLimiter(rate.NewLimiter(10, 0))).Error(), "burst 0") {
		t.Fatal("error does not state the rule")
	}
	// rate.Inf ignores the burst: accepted.
	if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithLimiter(rate.NewLimiter(rate.Inf, 0))); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidPolicySameErrorEverywhere(t *testing.T) {
	bad := rebound.Policy{Multiplier: 0.1}
	_, err1 := rebound.NewRetrier(bad)
	err2 := rebound.Retry(context.Background(), bad, func(context.Context) error { return nil })
	for _, err := range []error{err1, err2} {
		if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "Multiplier = 0.1") {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestRetryHugeRetryAfterClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		err := rebound.Retry(t.Context(), fast, func(context.Context) error {
			calls++
			if calls == 1 {
				return rebound.RetryAfter(4294967295*time.Second, errBoom)
			}
			return nil
		})
		if err != nil || time.Since(start) != 5*time.Minute {
			t.Fatalf("Retry = %v after %v, want success after the 5m cap", err, time.Since(start))
		}
	})
}

func TestRetrierHooksOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		rec := func(e rebound.Event) { got = append(got, e.Kind.String()) }
		h := rebound.Hooks{Attempted: rec, Retried: rec, Recovered: rec, GaveUp: rec}
		r := mustRetrier(t, fast, rebound.WithObserver(h))
		calls := 0
		if err := r.Do(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return errBoom
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := "attempt retry attempt retry attempt recovered"
		if s := strings.Join(got, " "); s != want {
			t.Fatalf("hooks: %s, want %s", s, want)
		}
		got = nil
		_ = r.Do(t.Context(), func(context.Context) error { return rebound.Permanent(errBoom) })
		if s := strings.Join(got, " "); s != "attempt give-up" {
			t.Fatalf("hooks: %s", s)
		}
	})
}

func TestRetrierDoNoAllocsWithObservers(t *testing.T) {
	n := 0
	r := mustRetrier(t, rebound.Policy{},
		rebound.WithObserver(rebound.Hooks{Attempted: func(rebound.Event) { n++ }}),
		rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) { n++ })))
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	if allocs := testing.AllocsPerRun(1000, func() { _ = r.Do(ctx, op) }); allocs != 0 {
		t.Fatalf("Retrier.Do success with hooks: %v allocs, want 0", allocs)
	}
	if n == 0 {
		t.Fatal("hooks not called")
	}
}

func TestRetrierSchedulesDrawDifferently(t *testing.T) {
	r := mustRetrier(t, rebound.Policy{}, rebound.WithSeed(1))
	a, b := newLoop(r, t0), newLoop(r, t0)
	same := true
	for i := 0; i < 10; i++ {
		da, _ := a.next(errBoom, t0)
		db, _ := b.next(errBoom, t0)
		same = same && da == db
	}
	if same {
		t.Fatal("two schedules of one seeded Retrier retry in lockstep")
	}
}

// A loop built on a Schedule is observed through the Retrier's hooks like
// Retry.
func TestScheduleReportsToHooks(t *testing.T) {
	var got []string
	rec := func(e rebound.Event) { got = append(got, fmt.Sprintf("%s:%d", e.Kind, e.Attempt)) }
	p := rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}
	r := mustRetrier(t, p, rebound.WithMaxAttempts(3), rebound.WithObserver(rebound.Hooks{Attempted: rec, Retried: rec, Recovered: rec, GaveUp: rec}))
	s := newLoop(r, t0)
	s.next(errBoom, t0)
	s.succeeded(t0.Add(time.Second))
	s.next(errBoom, t0)
	s.next(errBoom, t0)
	s.next(errBoom, t0)
	want := "attempt:1 retry:1 attempt:2 recovered:2 attempt:1 retry:1 attempt:2 retry:2 attempt:3 give-up:3"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("hooks:\n%s\nwant\n%s", s, want)
	}
}

// Whatever the policy and the Retry-After, Next never returns a delay below
// MinDelay or above max(Max, MaxRetryAfter), and never stops an unlimited
// policy.
func FuzzScheduleNext(f *testing.F) {
	f.Add(int64(time.Second), 2.0, int64(30*time.Second), 0, int64(0), int64(4294967295*time.Second), uint64(1), 100)
	f.Add(int64(-1), 1e308, int64(math.MaxInt64), 2, int64(-5), int64(-1), uint64(2), 1000)
	f.Add(int64(1), 1.0, int64(1), 3, int64(time.Hour), int64(math.MaxInt64), uint64(3), 50)
	f.Fuzz(func(t *testing.T, initial int64, mult float64, maxD int64, jitter int, maxRA, ra int64, seed uint64, n int) {
		p := rebound.Policy{Initial: time.Duration(initial), Multiplier: mult, Max: time.Duration(maxD),
			Jitter: rebound.Jitter(jitter), MaxRetryAfter: time.Duration(maxRA)}.Normalized()
		r, err := rebound.NewRetrier(p, rebound.WithSeed(seed))
		if err != nil {
			t.Fatalf("NewRetrier(Normalized) = %v", err)
		}
		s := newLoop(r, t0)
		hi := max(p.Max, p.MaxRetryAfter)
		now := t0
		for i := 0; i < min(max(n, 0), 2000); i++ {
			e := error(errBoom)
			if i%3 == 1 {
				e = rebound.RetryAfter(time.Duration(ra), errBoom)
			}
			d, stop := s.next(e, now)
			if stop != nil {
				t.Fatalf("draw %d: stop %v from an unlimited policy", i, stop)
			}
			if d < rebound.MinDelay || d > hi {
				t.Fatalf("draw %d = %v: outside [MinDelay, %v]", i, d, hi)
			}
			now = now.Add(d)
		}
	})
}

// A loop that stops while waiting reports GaveUp with Waiting: its last
// attempt was already reported as a retry.
func TestGaveUpWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		rec := func(e rebound.Event) { got = append(got, fmt.Sprintf("%s:%d:%v", e.Kind, e.Attempt, e.Waiting)) }
		r := mustRetrier(t, rebound.Policy{Initial: time.Hour, Jitter: rebound.NoJitter},
			rebound.WithObserver(rebound.Hooks{Attempted: rec, Retried: rec, GaveUp: rec}))
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(time.Minute); cancel() }()
		if err := r.Do(ctx, func(context.Context) error { return errBoom }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v", err)
		}
		if s := strings.Join(got, " "); s != "attempt:1:false retry:1:false give-up:1:true" {
			t.Fatalf("hooks: %s", s)
		}
	})
}
