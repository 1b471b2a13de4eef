package rebound_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// TestEngineStress: eight goroutines share one Retrier, its limiter,
// budget, throttle and a gobreaker, with failures and deadlines at random
// (a ctx already done before the first attempt is left out: that call
// ends before the loop, unreported). Every attempt is reported once,
// every error once to GaveUp, and the breaker admits again afterwards.
func TestEngineStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
			MaxRequests: 2, Timeout: 100 * time.Millisecond,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
		})
		lim := rate.NewLimiter(rate.Every(5*time.Millisecond), 2)
		b := mustBudget(t, 0.2, 10, 10*time.Second)
		th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
		var mu sync.Mutex
		counts := map[string]int{}
		ev := func(k string) func(rebound.Event) {
			return func(rebound.Event) { mu.Lock(); counts[k]++; mu.Unlock() }
		}
		r := mustRetrier(t, rebound.Policy{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond},
			rebound.WithBreaker(cb), rebound.WithLimiter(lim), rebound.WithBudget(b), rebound.WithThrottle(th),
			rebound.WithAdmission(rebound.FirstAttempt, rebound.GateLimiter|rebound.GateBudget|rebound.GateThrottle|rebound.GateBreaker),
			rebound.WithObserver(rebound.Hooks{Attempted: ev("attempted"), Retried: ev("retried"), Throttled: ev("throttled"), GaveUp: ev("gaveup"), Recovered: ev("recovered")}), rebound.WithMaxAttempts(6))
		var wg sync.WaitGroup
		var calls, oks, errs int
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(g), 9))
				for range 200 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rnd.IntN(500))*time.Millisecond)
					err := r.Do(ctx, func(context.Context) error {
						mu.Lock()
						calls++
						mu.Unlock()
						if rnd.IntN(3) == 0 {
							return errors.New("down")
						}
						return nil
					})
					cancel()
					mu.Lock()
					if err == nil {
						oks++
					} else {
						errs++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("calls %d ok %d err %d hooks %v breaker %v %+v", calls, oks, errs, counts, cb.State(), cb.Counts())
		if counts["gaveup"] != errs {
			t.Errorf("GaveUp %d, errors %d", counts["gaveup"], errs)
		}
		if counts["attempted"] != calls {
			t.Errorf("Attempted %d, calls %d", counts["attempted"], calls)
		}
		// The breaker is not left stuck: after its Timeout it admits a
		// probe (a half-open breaker whose probe was never reported would
		// refuse with ErrTooManyRequests). The throttle is left out of
		// this check: it remembers the rejections of its 2-minute window,
		// and may rightly reject a request now.
		time.Sleep(time.Second)
		done, err := cb.Allow()
		if err != nil {
			t.Fatalf("after: the breaker refuses: %v (%v %+v)", err, cb.State(), cb.Counts())
		}
		done(nil)
	})
}
