package failback

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestBudgetBoundsRetriesInOutage (issue 13): during a full provider
// outage, with a 20% retry budget, the retries sent are at most 20% of the
// calls plus the budget's floor; every other call is queued (Invoke
// returns nil) and ends Dropped(budget), never lost.
func TestBudgetBoundsRetriesInOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			calls   = 2000
			spread  = 20 * time.Second // calls arrive at 100/s
			run     = 60 * time.Second // the whole outage, calls and retries
			floorPS = 1.0
		)
		budget, err := rebound.NewRetryBudget(0.2, floorPS, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p := newProvider("a:1", alwaysFail(errRefused)) // down for the whole test
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), withBudget(budget),
			WithMaxTasks(calls), WithConcurrency(16),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: 4 * time.Second}, rebound.WithMaxAttempts(10)))
		for range calls {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil {
				t.Fatalf("Invoke = %v, want nil: a call the budget refuses is queued, then dropped when its retry is due", err)
			}
			time.Sleep(spread / calls)
		}
		time.Sleep(run - spread)
		mustClose(t, f)

		retries := len(p.retries())
		bound := int(0.2*calls + floorPS*run.Seconds())
		s := f.Stats()
		checkStats(t, s)
		t.Logf("%d calls, %d retries sent (bound %d = 20%% of calls + %g/s x %v); stats %+v",
			calls, retries, bound, floorPS, run, s)
		if retries > bound {
			t.Fatalf("%d retries sent during the outage; the 20%% budget allows at most %d", retries, bound)
		}
		if s.Retried != uint64(retries) {
			t.Errorf("Stats.Retried %d, provider saw %d", s.Retried, retries)
		}
		if s.Dropped[rebound.ErrBudgetExhausted] == 0 || rec.dropped[rebound.ErrBudgetExhausted] != int(s.Dropped[rebound.ErrBudgetExhausted]) {
			t.Errorf("budget drops: stats %d, hooks %d; want them reported and equal", s.Dropped[rebound.ErrBudgetExhausted], rec.dropped[rebound.ErrBudgetExhausted])
		}
		for _, tk := range rec.get("dropped") {
			if tk.Err == nil {
				t.Fatalf("dropped task without its last error: %+v", tk)
			}
		}
		// Without the budget, the same outage sends a retry for every call
		// and attempt: 9 per call here.
	})
}

// TestThrottleReschedulesRetries: an adaptive throttle that has seen only
// rejections rejects most retries locally; each rejected one is not sent,
// counts as a failed attempt and is rescheduled (Retried with
// rebound.ErrThrottled, Stats.Throttled), never dropped; first attempts are
// never rejected. Once the provider is back, every call succeeds, with
// fewer retries sent into the outage than without the throttle.
func TestThrottleReschedulesRetries(t *testing.T) {
	run := func(t *testing.T, throttle bool) (Stats, int, *recorder) {
		p := newProvider("a:1", downUntil(30*time.Second))
		rec := newRecorder()
		opts := []Option{withObserver(rec.hooks()), WithMaxTasks(1000),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: 2 * time.Second})}
		if throttle {
			th, err := rebound.NewAdaptiveThrottle(2, 10*time.Second, seeded(1))
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, withThrottle(th))
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), opts...)
		const calls = 500
		for range calls {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
				t.Fatalf("Invoke = %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(10 * time.Minute)
		mustClose(t, f)
		first, intoOutage := 0, 0
		for _, c := range p.snapshot() {
			if c.first {
				first++
			} else if c.at < 30*time.Second {
				intoOutage++
			}
		}
		if first != calls {
			t.Fatalf("%d first attempts made; want all %d (the throttle never rejects a first attempt)", first, calls)
		}
		s := f.Stats()
		checkStats(t, s)
		if s.Succeeded != calls || s.GaveUp != 0 || sumDropped(s) != 0 || rec.count("dropped") != 0 {
			t.Fatalf("stats %+v: want every call to succeed, none dropped", s)
		}
		return s, intoOutage, rec
	}
	synctest.Test(t, func(t *testing.T) {
		s, sent, rec := run(t, true)
		_, plain, _ := run(t, false)
		t.Logf("retries sent into the outage: %d with the throttle (%d rejected locally), %d without; stats %+v", sent, s.Throttled, plain, s)
		if s.Throttled == 0 || sent >= plain {
			t.Fatalf("throttle rejected %d, sent %d retries into the outage (without: %d): want rejections and fewer", s.Throttled, sent, plain)
		}
		throttledHooks := 0
		for _, tk := range rec.get("retried") {
			if errors.Is(tk.Err, rebound.ErrThrottled) {
				throttledHooks++
				if tk.Delay <= 0 {
					t.Fatalf("throttled retry rescheduled with delay %v", tk.Delay)
				}
			}
		}
		if uint64(throttledHooks) != s.Throttled {
			t.Fatalf("%d Retried hooks with ErrThrottled, Stats.Throttled %d", throttledHooks, s.Throttled)
		}
	})
}

// TestThrottledCallGivesUpWithPolicy: in an outage that outlasts the
// policy, a call whose last attempt the throttle rejected ends in GaveUp
// with Reason ErrExhausted and Last ErrThrottled, never in Dropped.
func TestThrottledCallGivesUpWithPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
		if err != nil {
			t.Fatal(err)
		}
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), withThrottle(th), WithMaxTasks(1000),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second}, rebound.WithMaxAttempts(5)))
		const calls = 200
		for range calls {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil {
				t.Fatalf("Invoke = %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Minute)
		mustClose(t, f)
		s := f.Stats()
		checkStats(t, s)
		if s.GaveUp != calls || rec.count("dropped") != 0 || s.Throttled == 0 {
			t.Fatalf("stats %+v: want every call to give up, none dropped, some throttled", s)
		}
		last := 0
		for _, tk := range rec.get("gaveup") {
			var ge *rebound.RetryError
			if !errors.As(tk.Err, &ge) || ge.Attempts != 5 || !errors.Is(ge.Reason, rebound.ErrExhausted) {
				t.Fatalf("GaveUp %v: want 5 attempts, ErrExhausted", tk.Err)
			}
			if errors.Is(ge.Last, rebound.ErrThrottled) {
				last++
			}
		}
		if retries := uint64(len(p.retries())); retries != s.Retried || retries+s.Throttled != calls*4 {
			t.Fatalf("%d retries sent (Stats.Retried %d) + %d throttled, want %d attempts after the first", retries, s.Retried, s.Throttled, calls*4)
		}
		if last == 0 {
			t.Fatalf("no call gave up on a throttled attempt")
		}
	})
}

// TestBudgetAskedWhenTheRetryIsDue: the engine asks the budget for a retry
// when the retry is due (rebound.RefuseDrop), not when the attempt before
// it failed. A call whose first attempt fails while a shared budget is
// spent (another loop took the only retry) is queued, and when its retry
// is due the requests sent meanwhile have refilled the budget: the retry
// is sent and succeeds. (Charged at the failure, it was refused at once and
// Invoke returned a *rejectedError with rebound.ErrBudgetExhausted.) Example_budget
// shows a retry the budget still refuses when due: dropped, rebound.ErrBudgetExhausted.
func TestBudgetAskedWhenTheRetryIsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget, err := rebound.NewRetryBudget(1, 0, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int32
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			if n.Add(1) == 1 {
				// Another loop sharing the budget takes the retry the
				// first attempt's deposit allowed.
				if !takeRetry(t, budget, time.Now()) {
					t.Error("the first attempt's deposit allowed no retry")
				}
				return nil, errRefused
			}
			return "ok", nil
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withBudget(budget), withObserver(rec.hooks()),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(3)))
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatalf("Invoke with the budget spent: %v, want the call queued (the budget is asked when the retry is due)", err)
		}
		time.Sleep(500 * time.Millisecond)
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"}); err != nil { // a request: a deposit
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		s := f.Stats()
		if s.Succeeded != 1 || s.Retried != 1 || s.Dropped[rebound.ErrBudgetExhausted] != 0 {
			t.Fatalf("Stats %+v: want the queued call's retry sent and succeeded once the budget refilled", s)
		}
		if got := rec.get("succeeded"); len(got) != 1 || got[0].Attempts != 2 {
			t.Fatalf("Succeeded hooks %+v, want one with Attempts 2", got)
		}
		mustClose(t, f)
	})
}

// seeded returns a deterministic random source for a throttle's draws.
func seeded(s uint64) *rand.PCG { return rand.NewPCG(s, s^0x9e3779b97f4a7c15) }
