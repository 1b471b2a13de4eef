package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
)

func mustBudget(t testing.TB, ratio, minPerSecond float64, window time.Duration) *rebound.RetryBudget {
	t.Helper()
	b, err := rebound.NewRetryBudget(ratio, minPerSecond, window)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBudgetFloorAndWindow(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second) // 20% + 10/s over 10 s: 100 retries with no traffic
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
	b := mustBudget(t, 0.2, 0, 10*time.Second)
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
	if got := mustBudget(t, 0.5, 1, 2*time.Second).Balance(t0); got != 2 {
		t.Fatalf("floor 1/s over 2 s: Balance = %d, want 2", got)
	}
}

func TestBudgetOptionsRejected(t *testing.T) {
	for _, tc := range []struct {
		ratio, minPS float64
		window       time.Duration
		name         string
	}{
		{-1, 10, 10 * time.Second, "ratio"},
		{2000, 10, 10 * time.Second, "ratio"},
		{0.2, 10, 0, "window"},
		{0.2, -1, 10 * time.Second, "minPerSecond"},
	} {
		_, err := rebound.NewRetryBudget(tc.ratio, tc.minPS, tc.window)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != "rebound.NewRetryBudget" || ae.Arg != tc.name || !errors.Is(err, rebound.ErrInvalidArgument) {
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
	b := mustBudget(t, 0.2, 0, 10*time.Second)
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
		b := mustBudget(t, 0.2, 0, 10*time.Second)
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
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
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
	th2, _ := rebound.NewAdaptiveThrottle(1.5, time.Second, nil)
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
	var nilPCG *rand.PCG
	for _, tc := range []struct {
		k      float64
		window time.Duration
		src    rand.Source
	}{{0.5, 2 * time.Minute, nil}, {2, time.Millisecond, nil}, {2, 2 * time.Minute, nilPCG}} {
		if _, err := rebound.NewAdaptiveThrottle(tc.k, tc.window, tc.src); !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Fatalf("bad value accepted (k %v, window %v, src %#v): %v", tc.k, tc.window, tc.src, err)
		}
	}
}

// An attempt the throttle rejects locally is not made; it counts as a
// failed attempt and the loop backs off (it does not end): with the
// throttle closed for good, Retry gives up only when MaxAttempts runs out,
// with Reason ErrExhausted and Last ErrThrottled, having never called op.
func TestRetryWithThrottleBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(2))
		for i := 0; i < 100000; i++ {
			th.Allow(time.Now()) // no accept: p ~ 1
		}
		var got []rebound.Event
		h := rebound.Hooks{
			Attempted: func(e rebound.Event) { got = append(got, e) },
			Throttled: func(e rebound.Event) { got = append(got, e) },
			GaveUp:    func(e rebound.Event) { got = append(got, e) },
		}
		calls := 0
		p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
		start := time.Now()
		err := rebound.Retry(context.Background(), p, func(context.Context) error { calls++; return nil },
			rebound.WithThrottle(th), rebound.WithObserver(h), rebound.WithMaxAttempts(3))
		var re *rebound.RetryError
		if !errors.As(err, &re) || !errors.Is(err, rebound.ErrExhausted) || !errors.Is(err, rebound.ErrThrottled) ||
			re.Attempts != 3 || !strings.Contains(err.Error(), "rejected locally") {
			t.Fatalf("Retry = %v, want ErrExhausted after 3 attempts, last ErrThrottled", err)
		}
		if calls != 0 {
			t.Fatalf("op called %d times, want 0 (every attempt rejected locally)", calls)
		}
		if el := time.Since(start); el != 2*time.Second {
			t.Fatalf("gave up after %v, want 2s (two 1s backoffs between three rejected attempts)", el)
		}
		want := []string{"throttled 1 1s", "throttled 2 1s", "throttled 3 0s", "give-up 3 0s waiting"}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i, e := range got {
			s := fmt.Sprintf("%v %d %v", e.Kind, e.Attempt, e.Delay)
			if e.Waiting {
				s += " waiting"
			}
			if s != want[i] || (e.Kind == rebound.EventThrottled && e.Err != rebound.ErrThrottled) {
				t.Fatalf("event %d = %s (%v), want %s", i, s, e.Err, want[i])
			}
		}
	})
}

// A throttle that opens again lets the loop through: the rejected attempts
// were deferred, not lost.
func TestRetryThrottledThenSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, _ := rebound.NewAdaptiveThrottle(2, 10*time.Second, seeded(3))
		for i := 0; i < 1000; i++ {
			th.Allow(time.Now())
		}
		throttled, calls := 0, 0
		h := rebound.Hooks{Throttled: func(e rebound.Event) {
			throttled++
			if e.Delay <= 0 {
				t.Errorf("throttled with delay %v: the loop must back off", e.Delay)
			}
		}}
		err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { calls++; return nil },
			rebound.WithThrottle(th), rebound.WithObserver(h))
		if err != nil || calls != 1 || throttled == 0 {
			t.Fatalf("Retry = %v, %d calls, %d throttled; want nil, 1 call after >= 1 rejection", err, calls, throttled)
		}
		// Accepted outcomes lower the probability: a success and a
		// permanent error are accepts, a transient error is not.
		th3, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
		r := mustRetrier(t, rebound.Policy{}, rebound.WithThrottle(th3), rebound.WithMaxAttempts(1))
		_ = r.Do(context.Background(), func(context.Context) error { return nil })
		_ = r.Do(context.Background(), func(context.Context) error { return rebound.Permanent(errBoom) })
		_ = r.Do(context.Background(), func(context.Context) error { return errBoom })
		if p := th3.Probability(time.Now()); p != 0 {
			t.Fatalf("Probability = %v after 2 accepts of 3, want 0", p)
		}
	})
}

// The Schedule's form, in injected time: Begin and Admit ask the throttle
// when an attempt is due; a rejection is a failed attempt that returns the
// next delay (Throttled true); the budget is charged once per retry Next
// schedules, not for the attempts the throttle deferred.
func TestScheduleThrottleInVirtualTime(t *testing.T) {
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	for i := 0; i < 100000; i++ {
		th.Allow(t0)
	}
	b, _ := rebound.NewRetryBudget(0.2, 1, 10*time.Second)
	var throttled, retried int
	h := rebound.Hooks{Throttled: func(rebound.Event) { throttled++ }, Retried: func(rebound.Event) { retried++ }}
	p := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}
	r := mustRetrier(t, p, rebound.WithThrottle(th), rebound.WithBudget(b), rebound.WithObserver(h), rebound.WithMaxAttempts(5))
	s := newLoop(r, t0)
	d, stop := s.begin(t0)
	if stop != nil || d != time.Second || !s.throttled() || s.Attempts() != 1 {
		t.Fatalf("Begin = %v, %v, throttled %v, attempts %d; want 1s, nil, true, 1", d, stop, s.throttled(), s.Attempts())
	}
	now := t0.Add(d)
	w, stop := s.admit(now)
	if stop != nil || w != time.Second || !s.throttled() || s.Attempts() != 2 {
		t.Fatalf("Admit = %v, %v, throttled %v, attempts %d", w, stop, s.throttled(), s.Attempts())
	}
	// The backend answers at last: accepts close the gap.
	for i := 0; i < 100000; i++ {
		th.Accepted(now)
	}
	now = now.Add(w)
	if w, stop = s.admit(now); stop != nil || w != 0 || s.throttled() {
		t.Fatalf("Admit after accepts = %v, %v, throttled %v; want 0, nil, false", w, stop, s.throttled())
	}
	if w, stop = s.admit(now); w != 0 || stop != nil { // asked once per attempt
		t.Fatalf("second Admit = %v, %v", w, stop)
	}
	// The attempt is sent and fails: Next counts attempt 3 and schedules
	// a retry (one budget withdrawal).
	if d, stop = s.next(errBoom, now); stop != nil || d != time.Second || s.Attempts() != 3 {
		t.Fatalf("Next = %v, %v, attempts %d", d, stop, s.Attempts())
	}
	if throttled != 2 || retried != 1 {
		t.Fatalf("hooks: %d throttled, %d retried; want 2, 1", throttled, retried)
	}
	if a := testing.AllocsPerRun(100, func() { s.admit(now) }); a != 0 {
		t.Fatalf("Admit with a throttle: %v allocs", a)
	}
}

// MaxAttempts runs out on a rejected attempt: the stop is ErrExhausted
// with Last ErrThrottled, and MaxElapsed counts the deferred time too.
func TestScheduleThrottleExhausts(t *testing.T) {
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	for i := 0; i < 100000; i++ {
		th.Allow(t0)
	}
	r := mustRetrier(t, rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}, rebound.WithThrottle(th), rebound.WithMaxAttempts(1))
	s := newLoop(r, t0)
	if d, stop := s.begin(t0); d != 0 || !errors.Is(stop, rebound.ErrExhausted) || !errors.Is(stop, rebound.ErrThrottled) {
		t.Fatalf("Begin with MaxAttempts 1 = %v, %v", d, stop)
	}
	r = mustRetrier(t, rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter}, rebound.WithThrottle(th), rebound.WithMaxElapsed(2500*time.Millisecond))
	s = newLoop(r, t0)
	now := t0
	var stop error
	for i := 0; i < 10 && stop == nil; i++ {
		var d time.Duration
		if i == 0 {
			d, stop = s.begin(now)
		} else {
			d, stop = s.admit(now)
		}
		now = now.Add(d)
	}
	if !errors.Is(stop, rebound.ErrExhausted) || !errors.Is(stop, rebound.ErrThrottled) || s.Attempts() != 2 {
		t.Fatalf("stop %v after %d attempts; want ErrExhausted/ErrThrottled after 2 (1s, then 2s would end past 2.5s)", stop, s.Attempts())
	}
}

// A refusal under RefuseDefer (a budget's, as a subscription's) defers
// the attempt: a failed attempt not sent, the next delay, the Throttled
// hook with that reason; the policy still ends it.
func TestScheduleRefuse(t *testing.T) {
	var events []rebound.Event
	h := rebound.Hooks{Throttled: func(e rebound.Event) { events = append(events, e) }}
	b, err := rebound.NewRetryBudget(0.000001, 0.000001, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := mustRetrier(t, rebound.Policy{Initial: time.Second, Max: 4 * time.Second, Jitter: rebound.NoJitter},
		rebound.WithObserver(h), rebound.WithBudget(b), rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer), rebound.WithMaxAttempts(3))
	s := newLoop(r, t0)
	if d, stop := s.next(errBoom, t0); stop != nil || d != time.Second {
		t.Fatalf("Next = %v, %v", d, stop)
	}
	d, stop := s.admit(t0.Add(time.Second))
	if stop != nil || d != 2*time.Second || !s.throttled() || s.Attempts() != 2 {
		t.Fatalf("Refuse = %v, %v, throttled %v, attempts %d; want 2s, nil, true, 2", d, stop, s.throttled(), s.Attempts())
	}
	if len(events) != 1 || events[0].Err != rebound.ErrBudgetExhausted || events[0].Delay != 2*time.Second {
		t.Fatalf("Throttled events %+v", events)
	}
	_, stop = s.admit(t0.Add(3 * time.Second))
	if !errors.Is(stop, rebound.ErrExhausted) || !errors.Is(stop, rebound.ErrBudgetExhausted) {
		t.Fatalf("Refuse past MaxAttempts: %v, want ErrExhausted with Last ErrBudgetExhausted", stop)
	}
}

func TestBudgetAndThrottleDoNotAllocate(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second)
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
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
	bud := mustBudget(b, 0.2, 10, 10*time.Second)
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
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
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
	bud := mustBudget(b, 0.2, 10, 10*time.Second)
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
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
	th, _ := rebound.NewAdaptiveThrottle(1, 2*time.Minute, nil)
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

// seeded returns a deterministic random source for a throttle's draws.
func seeded(s uint64) *rand.PCG { return rand.NewPCG(s, s^0x9e3779b97f4a7c15) }
