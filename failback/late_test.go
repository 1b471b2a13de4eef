package failback

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestLateWorkerThrottleBudgetAccounting: one worker held by slow
// attempts, a throttle that rejects about half the retries, a budget
// with a small floor and a MaxElapsed that the queue outlives. Every
// call offered ends exactly once (one Succeeded, GaveUp or Dropped hook),
// the Queued hooks match Offered, Stats add up and end empty, a late
// retry gives up with ErrExhausted, and Stats.Throttled matches the
// throttled reports.
func TestLateWorkerThrottleBudgetAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := rebound.NewRetryBudget(0.1, 2, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		th, err := rebound.NewAdaptiveThrottle(2, time.Hour, seeded(7))
		if err != nil {
			t.Fatal(err)
		}
		request := throttleRequests(t, th)
		for i := range 400 {
			request(time.Now(), i%4 == 0)
		}
		p := newProvider("a:1", func(_ context.Context, c call) (any, error) {
			var n int
			fmt.Sscanf(c.inv.Method, "m%d", &n)
			switch {
			case c.first:
				return nil, errRefused
			case n%5 == 0:
				time.Sleep(1500 * time.Millisecond) // holds the only worker
				return nil, errRefused
			case n%3 == 0:
				return "ok", nil
			}
			return nil, errRefused
		})
		rec := newRecorder()
		f := mustNew(t, cluster.NewStaticDirectory(p), withObserver(rec.hooks()), WithConcurrency(1),
			withBudget(b), withThrottle(th), withSeed(3),
			WithPolicy(rebound.Policy{Initial: 200 * time.Millisecond, Max: time.Second}, rebound.WithMaxElapsed(10*time.Second)))
		const calls = 60
		for i := range calls {
			_, _ = f.Invoke(callerCtx(), &cluster.Invocation{Method: fmt.Sprintf("m%d", i)})
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		s := f.Stats()
		checkStats(t, s)
		if s.Queued != 0 || s.InFlight != 0 {
			t.Fatalf("stats %+v: tasks left after every MaxElapsed passed", s)
		}
		if s.Offered != calls || rec.count("queued") != calls {
			t.Fatalf("offered %d, queued hooks %d; want %d", s.Offered, rec.count("queued"), calls)
		}
		ends := map[string]int{}
		for _, k := range []string{"succeeded", "gaveup", "dropped"} {
			for _, tk := range rec.get(k) {
				ends[tk.Invocation.Method]++
			}
		}
		for i := range calls {
			if m := fmt.Sprintf("m%d", i); ends[m] != 1 {
				t.Errorf("%s ended %d times", m, ends[m])
			}
		}
		exhausted := 0
		for _, tk := range rec.get("gaveup") {
			if errors.Is(tk.Err, rebound.ErrExhausted) || errors.Is(tk.Err, rebound.ErrThrottled) || errors.Is(tk.Err, errRefused) {
				exhausted++
			}
		}
		if uint64(exhausted) != s.GaveUp || s.GaveUp == 0 {
			t.Errorf("gave up %d, %d of them with a known error; gaveup %+v", s.GaveUp, exhausted, rec.get("gaveup"))
		}
		// A throttled retry is reported to Retried, or ends the call in
		// GaveUp with Err ErrThrottled; a call whose last refusal was the
		// throttle's and whose next retry came due late also gives up with
		// Err ErrThrottled, so the GaveUp hooks bound the rest.
		throttled, lastThrottled := 0, 0
		for _, tk := range rec.get("retried") {
			if errors.Is(tk.Err, rebound.ErrThrottled) {
				throttled++
			}
		}
		for _, tk := range rec.get("gaveup") {
			if errors.Is(tk.Err, rebound.ErrThrottled) {
				lastThrottled++
			}
		}
		if uint64(throttled) > s.Throttled || s.Throttled > uint64(throttled+lastThrottled) || s.Throttled == 0 {
			t.Errorf("Stats.Throttled %d, throttled reports %d", s.Throttled, throttled)
		}
		var sent uint64
		for _, c := range p.snapshot() {
			if !c.first {
				sent++
			}
		}
		if sent != s.Retried {
			t.Errorf("retries sent %d, Stats.Retried %d", sent, s.Retried)
		}
		t.Logf("stats %+v, throttled reports %d", s, throttled)
		mustClose(t, f)
	})
}
