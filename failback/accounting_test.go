package failback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// TestEveryCallEndsOnceWithItsAttempts: with a budget, a throttle, both,
// and MaxElapsed with one busy worker, every call Invoked ends in exactly
// one of Succeeded, GaveUp or Dropped; the final Task.Attempts of all
// calls add up to the attempts the provider saw plus Stats.Throttled (the
// retries rejected locally count as attempts); none exceeds MaxAttempts;
// no retry starts after MaxElapsed; Stats add up.
func TestEveryCallEndsOnceWithItsAttempts(t *testing.T) {
	for _, tc := range []struct {
		name             string
		budget, throttle bool
		maxElapsed       time.Duration
		conc             int
	}{
		{"plain", false, false, 0, 8},
		{"budget", true, false, 0, 8},
		{"throttle", false, true, 0, 8},
		{"both", true, true, 0, 8},
		{"both-elapsed-busy", true, true, 5 * time.Second, 1},
		{"elapsed-busy", false, false, 5 * time.Second, 1},
		{"throttle-elapsed-busy", false, true, 5 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const calls = 300
				var mu sync.Mutex
				sent := map[string]int{}
				born := map[string]time.Time{}
				var late []string
				p := newProvider("a:1", func(ctx context.Context, c call) (any, error) {
					mu.Lock()
					sent[c.inv.Method]++
					if c.first {
						born[c.inv.Method] = time.Now()
					} else if tc.maxElapsed > 0 && time.Since(born[c.inv.Method]) > tc.maxElapsed {
						late = append(late, fmt.Sprintf("%s at %v", c.inv.Method, time.Since(born[c.inv.Method])))
					}
					mu.Unlock()
					if tc.conc == 1 && !c.first {
						time.Sleep(time.Second)
					} else if !c.first {
						time.Sleep(100 * time.Millisecond)
					}
					if c.at > 40*time.Second {
						return "ok", nil
					}
					return nil, errRefused
				})
				var fmu sync.Mutex
				final := map[string][]string{}
				attempts := map[string]int{}
				throttled := map[string]int{}
				end := func(kind string) func(Task) {
					return func(tk Task) {
						fmu.Lock()
						final[tk.Invocation.Method] = append(final[tk.Invocation.Method], kind)
						attempts[tk.Invocation.Method] = tk.Attempts
						fmu.Unlock()
					}
				}
				hooks := testHooks{
					Retried: func(tk Task) {
						if errors.Is(tk.Err, rebound.ErrThrottled) {
							fmu.Lock()
							throttled[tk.Invocation.Method]++
							fmu.Unlock()
						}
					},
					Succeeded: end("succeeded"), GaveUp: func(tk Task) {
						var ge *rebound.RetryError
						if errors.As(tk.Err, &ge) && errors.Is(ge.Last, rebound.ErrThrottled) {
							fmu.Lock()
							throttled[tk.Invocation.Method]++
							fmu.Unlock()
						}
						end("gaveup")(tk)
					},
					Dropped: func(tk Task) { end("dropped:" + label(tk.Reason))(tk) },
				}
				const maxAttempts = 6
				pol := rebound.Policy{Initial: time.Second, Max: 4 * time.Second}
				opts := []Option{withObserver(hooks), WithMaxTasks(calls), WithConcurrency(tc.conc),
					WithPolicy(pol, rebound.WithMaxAttempts(maxAttempts), rebound.WithMaxElapsed(tc.maxElapsed))}
				if tc.budget {
					b, err := rebound.NewRetryBudget(0.1, 1, 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, withBudget(b))
				}
				if tc.throttle {
					th, err := rebound.NewAdaptiveThrottle(2, 10*time.Second, seeded(1))
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, withThrottle(th))
				}
				f := mustNew(t, cluster.NewStaticDirectory(p), opts...)
				for i := range calls {
					if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: fmt.Sprint("m", i)}); err != nil {
						t.Fatalf("Invoke = %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(10 * time.Minute)
				mustClose(t, f)
				s := f.Stats()
				checkStats(t, s)
				t.Logf("stats %+v", s)
				if int(s.Offered) != calls {
					t.Fatalf("Offered %d, want %d", s.Offered, calls)
				}
				fmu.Lock()
				mu.Lock()
				defer fmu.Unlock()
				defer mu.Unlock()
				bad, sumA, sumS := 0, 0, 0
				for i := range calls {
					m := fmt.Sprint("m", i)
					if len(final[m]) != 1 {
						t.Errorf("%s: final hooks %v", m, final[m])
						bad++
					}
					sumA += attempts[m]
					sumS += sent[m]
					if attempts[m] > maxAttempts {
						t.Errorf("%s: %d attempts > MaxAttempts", m, attempts[m])
					}
					if bad > 10 {
						t.FailNow()
					}
				}
				if sumA != sumS+int(s.Throttled) {
					t.Errorf("sum of final Task.Attempts %d, sent %d + Stats.Throttled %d", sumA, sumS, s.Throttled)
				}
				if len(late) > 0 {
					t.Errorf("%d retries started after MaxElapsed: %v", len(late), late[:min(5, len(late))])
				}
			})
		})
	}
}

// TestRestartKeepsTheCountOfThrottledAttempts: the attempts a Store keeps
// are the Schedule's, the retries the throttle rejected locally included,
// so a call restarted by a new Invoker gives up after exactly MaxAttempts
// in all: the attempts sent by both invokers plus the first one's
// rejections.
func TestRestartKeepsTheCountOfThrottledAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxAttempts = 8
		pol := rebound.Policy{Initial: time.Second, Max: time.Second}
		st := newMemStore()
		p := newProvider("a:1", alwaysFail(errRefused))
		th, err := rebound.NewAdaptiveThrottle(2, time.Hour, seeded(3))
		if err != nil {
			t.Fatal(err)
		}
		request := throttleRequests(t, th)
		for range 100 { // a throttle that has seen only failures rejects most retries
			request(time.Now(), false)
		}
		f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), withThrottle(th), WithPolicy(pol, rebound.WithMaxAttempts(maxAttempts)), withSeed(1))
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // some retries due, rejected or sent
		synctest.Wait()
		mustClose(t, f)
		throttled := f.Stats().Throttled
		calls, _ := st.snapshot()
		if len(calls) != 1 {
			t.Fatalf("stored %v, want the call kept for the next invoker", calls)
		}
		var stored int
		for _, c := range calls {
			stored = c.Attempts
		}
		if sent := len(p.snapshot()); stored != sent+int(throttled) || stored < 2 || stored >= maxAttempts {
			t.Fatalf("stored attempts %d; sent %d, throttled %d: want sent + throttled, some but not all of MaxAttempts", stored, sent, throttled)
		}
		rec := newRecorder()
		g := mustNew(t, cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(pol, rebound.WithMaxAttempts(maxAttempts)), withObserver(rec.hooks()))
		time.Sleep(time.Minute)
		synctest.Wait()
		mustClose(t, g)
		gave := rec.get("gaveup")
		if sent := len(p.snapshot()); len(gave) != 1 || gave[0].Attempts != maxAttempts || sent+int(throttled) != maxAttempts {
			t.Fatalf("gave up %+v; sent %d in all, throttled %d: want %d attempts in all", gave, sent, throttled, maxAttempts)
		}
	})
}

// TestThrottledRetriesDoNotSpendTheBudget: a retry the throttle rejects
// locally is not sent, so it should not spend the retry budget, and a call
// should not be dropped with rebound.ErrBudgetExhausted while the budget has paid for
// fewer retries sent than its floor allows.
func TestThrottledRetriesDoNotSpendTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := rebound.NewRetryBudget(0, 1, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		th, err := rebound.NewAdaptiveThrottle(2, time.Hour, seeded(1))
		if err != nil {
			t.Fatal(err)
		}
		request := throttleRequests(t, th)
		for range 1000 { // a throttle that has seen only failures rejects almost every retry
			request(time.Now(), false)
		}
		p := newProvider("a:1", alwaysFail(errRefused))
		f := mustNew(t, cluster.NewStaticDirectory(p), withBudget(b), withThrottle(th), withSeed(1),
			WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: 200 * time.Millisecond}, rebound.WithMaxAttempts(1000)))
		for range 20 {
			if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mustClose(t, f)
		s := f.Stats()
		if s.Retried < 10 && s.Dropped[rebound.ErrBudgetExhausted] > 0 {
			t.Fatalf("%d retries sent (the floor allows 10 in the window), %d rejected by the throttle, yet %d calls dropped by the budget",
				s.Retried, s.Throttled, s.Dropped[rebound.ErrBudgetExhausted])
		}
	})
}
