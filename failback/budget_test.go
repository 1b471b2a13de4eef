package failback

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestBudgetBoundsRetriesInOutage (issue 13): during a full provider
// outage, with a 20% retry budget, the retries sent are at most 20% of the
// calls plus the budget's floor; every other call ends Dropped(budget) or
// is refused with rebound.ErrBudgetExhausted, never lost.
func TestBudgetBoundsRetriesInOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			calls   = 2000
			spread  = 20 * time.Second // calls arrive at 100/s
			run     = 60 * time.Second // the whole outage, calls and retries
			floorPS = 1.0
		)
		budget, err := rebound.NewRetryBudget(rebound.BudgetRatio(0.2), rebound.BudgetMinPerSecond(floorPS))
		if err != nil {
			t.Fatal(err)
		}
		p := newProvider("a:1", alwaysFail(errRefused)) // down for the whole test
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), WithHooks(rec.hooks()), WithBudget(budget),
			WithMaxTasks(calls), WithConcurrency(16),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: 4 * time.Second, MaxAttempts: 10}))
		var rejected int
		for range calls {
			_, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "Notify"})
			var rej *RejectedError
			switch {
			case err == nil:
			case errors.As(err, &rej) && rej.Reason == DropBudget && errors.Is(err, rebound.ErrBudgetExhausted):
				rejected++
			default:
				t.Fatalf("Invoke = %v", err)
			}
			time.Sleep(spread / calls)
		}
		time.Sleep(run - spread)
		mustClose(t, f)

		retries := len(p.retries())
		bound := int(0.2*calls + floorPS*run.Seconds())
		s := f.Stats()
		checkStats(t, s)
		t.Logf("%d calls, %d retries sent (bound %d = 20%% of calls + %g/s x %v); %d refused at Invoke; stats %+v",
			calls, retries, bound, floorPS, run, rejected, s)
		if retries > bound {
			t.Fatalf("%d retries sent during the outage; the 20%% budget allows at most %d", retries, bound)
		}
		if s.Retried != uint64(retries) {
			t.Errorf("Stats.Retried %d, provider saw %d", s.Retried, retries)
		}
		if s.Dropped[DropBudget] == 0 || rec.dropped[DropBudget] != int(s.Dropped[DropBudget]) {
			t.Errorf("budget drops: stats %d, hooks %d; want them reported and equal", s.Dropped[DropBudget], rec.dropped[DropBudget])
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

// TestThrottleDropsRetries: an adaptive throttle that has seen only
// rejections refuses most retries locally; each refused one is reported
// Dropped(throttled), first attempts are never refused.
func TestThrottleDropsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := rebound.NewAdaptiveThrottle(rebound.ThrottleSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		p := newProvider("a:1", alwaysFail(errRefused))
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), WithHooks(rec.hooks()), WithThrottle(th), WithMaxTasks(1000),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, MaxAttempts: 5}))
		const calls = 500
		for range calls {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{}); err != nil && !errors.Is(err, rebound.ErrThrottled) {
				t.Fatalf("Invoke = %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Minute)
		mustClose(t, f)
		first := 0
		for _, c := range p.snapshot() {
			if c.first {
				first++
			}
		}
		s := f.Stats()
		checkStats(t, s)
		t.Logf("throttle %v: %d first attempts, %d retries; stats %+v", th, first, len(p.retries()), s)
		if first != calls {
			t.Fatalf("%d first attempts made; want all %d (the throttle never refuses a first attempt)", first, calls)
		}
		if s.Dropped[DropThrottled] == 0 || rec.dropped[DropThrottled] != int(s.Dropped[DropThrottled]) {
			t.Fatalf("throttled: stats %d, hooks %d", s.Dropped[DropThrottled], rec.dropped[DropThrottled])
		}
		if retries := len(p.retries()); retries > calls*4/2 {
			t.Errorf("%d retries sent: the throttle refused too few (no throttle: %d)", retries, calls*4)
		}
	})
}
