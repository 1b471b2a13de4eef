package rebound_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// lockedBreaker counts admissions and their reports, for Retriers shared
// by goroutines.
type lockedBreaker struct {
	mu            sync.Mutex
	allows, dones int
}

func (b *lockedBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allows++
	var once atomic.Bool
	return func(error) {
		if once.Swap(true) {
			panic("a breaker admission reported twice")
		}
		b.mu.Lock()
		b.dones++
		b.mu.Unlock()
	}, nil
}

// TestBreakSharedRetrierAccounting runs 50 Retrier.Do loops at once on one
// Retrier with a limiter, a budget, a throttle and a breaker, in virtual
// time; some ctxs end while a loop waits for its backoff or a token, some
// ops fail for good. Correct behaviour: every loop returns, every breaker
// admission is reported exactly once (none held after the loops), and no
// attempt is made while no admission is held.
func TestBreakSharedRetrierAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := &lockedBreaker{}
		th, err := rebound.NewAdaptiveThrottle(2, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		bud, err := rebound.NewRetryBudget(0.5, 5, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := mustRetrier(t, rebound.Policy{Initial: 10 * time.Millisecond, Max: time.Second},
			rebound.WithBreaker(br), rebound.WithLimiter(rate.NewLimiter(20, 2)), rebound.WithThrottle(th),
			rebound.WithBudget(bud), rebound.WithMaxAttempts(6))
		var calls atomic.Int64
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*97*time.Millisecond+time.Millisecond)
				defer cancel()
				n := 0
				err := r.Do(ctx, func(ctx context.Context) error {
					calls.Add(1)
					br.mu.Lock()
					open := br.allows - br.dones
					br.mu.Unlock()
					if open <= 0 {
						t.Errorf("loop %d: an attempt made with no breaker admission held", i)
					}
					n++
					switch {
					case i%5 == 0 && n == 2:
						return rebound.Permanent(errBoom)
					case i%3 == 0 && n == 3:
						return nil
					}
					time.Sleep(time.Duration(i%4) * 5 * time.Millisecond)
					return errBoom
				})
				if err == nil && i%3 != 0 {
					t.Errorf("loop %d: nil error", i)
				}
				if err != nil && !errors.Is(err, errBoom) && !errors.Is(err, context.DeadlineExceeded) &&
					!errors.Is(err, rebound.ErrExhausted) && !errors.Is(err, rebound.ErrBudgetExhausted) &&
					!errors.Is(err, rebound.ErrThrottled) && !errors.Is(err, rebound.ErrBreakerOpen) {
					t.Errorf("loop %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		br.mu.Lock()
		defer br.mu.Unlock()
		if br.allows != br.dones {
			t.Errorf("breaker: %d admissions, %d reported (%d calls)", br.allows, br.dones, calls.Load())
		}
		if calls.Load() == 0 {
			t.Error("no call made")
		}
	})
}
