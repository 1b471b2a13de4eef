package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// A first attempt behind the limiter (WithAdmission) in Retrier.Do.
func TestRetrierDoFirstAttemptBehindLimiter(t *testing.T) {
	first := rebound.WithAdmission(rebound.FirstAttempt, rebound.GateLimiter|rebound.GateBreaker)
	t.Run("breaker refusal gives the token back", func(t *testing.T) {
		clk := &stepClock{t: t0}
		lim := rate.NewLimiter(rate.Every(time.Second), 1)
		r := mustRetrier(t, fixed, first, rebound.WithClock(clk), rebound.WithLimiter(lim),
			rebound.WithBreaker(&fakeBreaker{open: true}), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop))
		if err := r.Do(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, rebound.ErrBreakerOpen) {
			t.Fatalf("Do: %v", err)
		}
		if w := lim.ReserveN(t0, 1).DelayFrom(t0); w != 0 {
			t.Errorf("after a refused first attempt the next token comes in %v, want 0 (the token not used given back)", w)
		}
	})
	t.Run("token after MaxElapsed stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var h hookCount
			lim := rate.NewLimiter(rate.Every(10*time.Second), 1)
			lim.Allow() // the burst is spent: the next token in 10s
			r := mustRetrier(t, fixed, rebound.WithMaxElapsed(time.Second), first, rebound.WithLimiter(lim), h.hooks())
			called := false
			err := r.Do(context.Background(), func(context.Context) error { called = true; return nil })
			if called || !errors.Is(err, rebound.ErrExhausted) || h.gaveUp != 1 {
				t.Errorf("Do: %v, op called %v, GaveUp %d; want ErrExhausted (the token comes after MaxElapsed), op not called, 1 GaveUp", err, called, h.gaveUp)
			}
		})
	})
	t.Run("ctx done while waiting is reported", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var h hookCount
			lim := rate.NewLimiter(rate.Every(10*time.Second), 1)
			lim.Allow()
			r := mustRetrier(t, fixed, first, rebound.WithLimiter(lim), h.hooks())
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := r.Do(ctx, func(context.Context) error { t.Error("op called"); return nil })
			if !errors.Is(err, context.DeadlineExceeded) || h.gaveUp != 1 {
				t.Errorf("Do: %v, GaveUp %d; want DeadlineExceeded and 1 GaveUp", err, h.gaveUp)
			}
			ctx2, cancel2 := context.WithCancel(context.Background())
			go func() { time.Sleep(time.Second); cancel2() }()
			err = r.Do(ctx2, func(context.Context) error { t.Error("op called"); return nil })
			if !errors.Is(err, context.Canceled) || h.gaveUp != 2 {
				t.Errorf("Do: %v, GaveUp %d; want Canceled and 2 GaveUps", err, h.gaveUp)
			}
		})
	})
	t.Run("a limiter that can no longer grant", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim := rate.NewLimiter(rate.Every(time.Second), 1)
			r := mustRetrier(t, fixed, first, rebound.WithLimiter(lim))
			lim.SetBurst(0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			err := r.Do(ctx, func(context.Context) error { return nil })
			if !errors.Is(err, rebound.ErrExhausted) {
				t.Errorf("Do: %v, want ErrExhausted (the limiter can never grant a token), as Decide says", err)
			}
		})
	})
}

// The first attempt's wait for its token is its Event.LimiterWait, in
// Retrier.Do as in Decide.
func TestRetrierDoFirstTokenWaitReported(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("first attempt fails %v", fail), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := rate.NewLimiter(rate.Every(time.Second), 1)
				lim.Allow() // the next token in 1s
				var waits []time.Duration
				r := mustRetrier(t, fixed, rebound.WithLimiter(lim),
					rebound.WithAdmission(rebound.FirstAttempt, rebound.GateLimiter),
					rebound.WithAdmission(rebound.RetryAttempt, 0),
					rebound.WithObserver(rebound.Hooks{Attempted: func(e rebound.Event) { waits = append(waits, e.LimiterWait) }}))
				n := 0
				err := r.Do(context.Background(), func(context.Context) error {
					n++
					if fail && n == 1 {
						return errors.New("down")
					}
					return nil
				})
				if err != nil || len(waits) == 0 || waits[0] != time.Second {
					t.Errorf("Do %v, LimiterWait of each attempt %v; want the first 1s", err, waits)
				}
			})
		})
	}
}
