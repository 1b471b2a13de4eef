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

	"github.com/rebound-go/rebound"
)

func mustBudget(t testing.TB, opts ...rebound.BudgetOption) *rebound.RetryBudget {
	t.Helper()
	b, err := rebound.NewRetryBudget(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBudgetFloorAndWindow(t *testing.T) {
	b := mustBudget(t) // 20% + 10/s over 10 s: 100 retries with no traffic
	if got := b.Balance(t0); got != 100 {
		t.Fatalf("Balance = %d, want 100 (the floor: 10/s x 10s)", got)
	}
	for i := 0; i < 100; i++ {
		if !b.TryWithdraw(t0) {
			t.Fatalf("retry %d refused", i)
		}
	}
	if b.TryWithdraw(t0) {
		t.Fatal("retry 101 allowed: the floor is 100 per window")
	}
	// 10 s later the withdrawals have left the window.
	if !b.TryWithdraw(t0.Add(10 * time.Second)) {
		t.Fatal("retry refused after the window passed")
	}
}

func TestBudgetRatioOfFirstAttempts(t *testing.T) {
	b := mustBudget(t, rebound.BudgetMinPerSecond(0))
	if b.TryWithdraw(t0) {
		t.Fatal("no floor, no traffic: retry allowed")
	}
	for i := 0; i < 100; i++ {
		b.Deposit(t0.Add(time.Duration(i) * 10 * time.Millisecond))
	}
	now := t0.Add(time.Second)
	n := 0
	for b.TryWithdraw(now) {
		n++
	}
	if n != 20 {
		t.Fatalf("%d retries for 100 requests, want 20", n)
	}
	// Deposits expire too: 11 s after them nothing is left.
	if got := b.Balance(t0.Add(11 * time.Second)); got != 0 {
		t.Fatalf("Balance after the window = %d, want 0", got)
	}
	if got := mustBudget(t, rebound.BudgetRatio(0.5), rebound.BudgetMinPerSecond(1), rebound.BudgetWindow(2*time.Second)).Balance(t0); got != 2 {
		t.Fatalf("floor 1/s over 2 s: Balance = %d, want 2", got)
	}
}

func TestBudgetOptionsRejected(t *testing.T) {
	for _, tc := range []struct {
		opt  rebound.BudgetOption
		name string
	}{
		{rebound.BudgetRatio(-1), "rebound.BudgetRatio"},
		{rebound.BudgetRatio(2000), "rebound.BudgetRatio"},
		{rebound.BudgetWindow(0), "rebound.BudgetWindow"},
		{rebound.BudgetMinPerSecond(-1), "rebound.BudgetMinPerSecond"},
	} {
		_, err := rebound.NewRetryBudget(tc.opt)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != tc.name || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
	}
	if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(nil)); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithBudget") {
		t.Fatalf("WithBudget(nil): %v", err)
	}
	if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithThrottle(nil)); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithThrottle") {
		t.Fatalf("WithThrottle(nil): %v", err)
	}
}

func TestBudgetConcurrentNeverOverdrawn(t *testing.T) {
	b := mustBudget(t, rebound.BudgetMinPerSecond(0))
	var wg sync.WaitGroup
	var granted atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				b.Deposit(t0)
				if b.TryWithdraw(t0) {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if g := granted.Load(); g > 1600 || g < 1590 {
		t.Fatalf("%d retries granted for 8000 requests, want about 1600 and never more", g)
	}
}

// During a full outage, calls sharing a 20% budget with no floor retry at
// most 20% of their number: Retry says why it stopped.
func TestRetryWithBudgetDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustBudget(t, rebound.BudgetMinPerSecond(0))
		r := mustRetrier(t, fast, rebound.WithBudget(b))
		var attempts atomic.Int64
		const calls = 100
		var wg sync.WaitGroup
		var refused atomic.Int64
		for i := 0; i < calls; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := r.Do(t.Context(), func(context.Context) error { attempts.Add(1); return errBoom })
				if errors.Is(err, rebound.ErrBudgetExhausted) && errors.Is(err, errBoom) && strings.Contains(err.Error(), "retry budget exhausted") {
					refused.Add(1)
				}
			}()
		}
		wg.Wait()
		if retries := attempts.Load() - calls; retries > calls/5 {
			t.Fatalf("%d retries for %d calls, want at most 20%%", retries, calls)
		}
		if refused.Load() != calls {
			t.Fatalf("%d of %d calls ended with ErrBudgetExhausted", refused.Load(), calls)
		}
	})
}

func TestThrottleProbability(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(rebound.ThrottleSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	// Half accepted: K=2, nothing rejected.
	for i := 0; i < 100; i++ {
		if !th.Allow(t0) {
			t.Fatal("rejected while the backend accepts half the requests")
		}
		if i%2 == 0 {
			th.Accepted(t0)
		}
	}
	if p := th.Probability(t0); p != 0 {
		t.Fatalf("Probability = %v, want 0", p)
	}
	// Backend rejects everything from now on (a fresh window).
	later := t0.Add(3 * time.Minute)
	sent := 0
	for i := 0; i < 1000; i++ {
		if th.Allow(later) {
			sent++
		}
	}
	if p := th.Probability(later); p < 0.99 {
		t.Fatalf("Probability after 1000 rejected requests = %v, want > 0.99", p)
	}
	if sent > 50 {
		t.Fatalf("%d of 1000 requests sent to a backend rejecting everything", sent)
	}
	// (req - 2*acc)/(req+1) exactly.
	th2, _ := rebound.NewAdaptiveThrottle(rebound.ThrottleK(1.5), rebound.ThrottleWindow(time.Second))
	for i := 0; i < 9; i++ {
		th2.Allow(t0)
	}
	for i := 0; i < 2; i++ {
		th2.Accepted(t0)
	}
	if p := th2.Probability(t0); p != (9-1.5*2)/10.0 {
		t.Fatalf("Probability = %v, want 0.6", p)
	}
	if p := th2.Probability(t0.Add(time.Second)); p != 0 {
		t.Fatalf("Probability after the window = %v, want 0", p)
	}
	for _, opt := range []rebound.ThrottleOption{rebound.ThrottleK(0.5), rebound.ThrottleWindow(time.Millisecond)} {
		if _, err := rebound.NewAdaptiveThrottle(opt); !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Fatalf("bad option accepted: %v", err)
		}
	}
}

// A throttled first attempt is not made; outcomes feed the throttle.
func TestRetryWithThrottle(t *testing.T) {
	th, _ := rebound.NewAdaptiveThrottle(rebound.ThrottleSeed(2))
	for i := 0; i < 1000; i++ {
		th.Allow(time.Now()) // 1000 requests, no accept: p ~ 1
	}
	calls := 0
	err := rebound.Retry(context.Background(), fast, func(context.Context) error { calls++; return nil }, rebound.WithThrottle(th))
	for i := 0; i < 10 && err == nil; i++ { // a few may pass: p = 1000/1001
		err = rebound.Retry(context.Background(), fast, func(context.Context) error { calls++; return nil }, rebound.WithThrottle(th))
	}
	if !errors.Is(err, rebound.ErrThrottled) || !strings.Contains(err.Error(), "rejected locally") {
		t.Fatalf("Retry = %v, want ErrThrottled", err)
	}
	// Accepted outcomes lower the probability: a success and a permanent
	// error are accepts, a transient error is not.
	th3, _ := rebound.NewAdaptiveThrottle()
	r := mustRetrier(t, rebound.Policy{MaxAttempts: 1}, rebound.WithThrottle(th3))
	_ = r.Do(context.Background(), func(context.Context) error { return nil })
	_ = r.Do(context.Background(), func(context.Context) error { return rebound.Permanent(errBoom) })
	_ = r.Do(context.Background(), func(context.Context) error { return errBoom })
	if p := th3.Probability(time.Now()); p != 0 {
		t.Fatalf("Probability = %v after 2 accepts of 3, want 0", p)
	}
}

func TestBudgetAndThrottleDoNotAllocate(t *testing.T) {
	b := mustBudget(t)
	th, _ := rebound.NewAdaptiveThrottle()
	now := t0
	if a := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		b.Deposit(now)
		b.TryWithdraw(now)
		th.Allow(now)
		th.Accepted(now)
	}); a != 0 {
		t.Fatalf("%v allocs, want 0", a)
	}
}

func BenchmarkRetryBudget(b *testing.B) {
	bud := mustBudget(b)
	now := time.Now()
	b.Run("Deposit+TryWithdraw", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t := now.Add(time.Duration(i) * time.Microsecond)
			bud.Deposit(t)
			bud.TryWithdraw(t)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bud.Deposit(now)
				bud.TryWithdraw(now)
			}
		})
	})
}

func BenchmarkAdaptiveThrottle(b *testing.B) {
	th, _ := rebound.NewAdaptiveThrottle()
	now := time.Now()
	b.Run("Allow+Accepted", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t := now.Add(time.Duration(i) * time.Microsecond)
			if th.Allow(t) && i%3 != 0 {
				th.Accepted(t)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				th.Allow(now)
				th.Accepted(now)
			}
		})
	})
}

func BenchmarkRetrierWithBudget(b *testing.B) {
	bud := mustBudget(b)
	th, _ := rebound.NewAdaptiveThrottle()
	r := mustRetrier(b, rebound.Policy{}, rebound.WithBudget(bud), rebound.WithThrottle(th))
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Do(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
}

// Each attempt's outcome is recorded once: a permanent first attempt is
// one accept.
func TestThrottleRecordsEachOutcomeOnce(t *testing.T) {
	th, _ := rebound.NewAdaptiveThrottle(rebound.ThrottleK(1))
	r := mustRetrier(t, rebound.Policy{}, rebound.WithThrottle(th))
	for i := 0; i < 2; i++ {
		if err := r.Do(context.Background(), func(context.Context) error { return rebound.Permanent(errBoom) }); err != errBoom {
			t.Fatalf("Do = %v", err)
		}
	}
	now := time.Now()
	for i := 0; i < 4; i++ {
		th.Allow(now)
	}
	if p := th.Probability(now); p != 4.0/7 {
		t.Fatalf("Probability = %v, want (6 requests - 2 accepts)/7", p)
	}
}
