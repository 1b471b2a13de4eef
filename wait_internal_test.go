package rebound

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleep(t.Context(), 3*time.Second, nil); err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("sleep = %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(time.Second); cancel() }()
		start = time.Now()
		if err := sleep(ctx, time.Hour, nil); !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Fatalf("sleep = %v after %v, want Canceled after 1s", err, time.Since(start))
		}
		if err := sleep(ctx, 0, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("sleep(done ctx, 0) = %v", err)
		}
	})
}

// The blocking step (Retrier.Do's): the delay, then the limiter; ctx done
// gives the token back.
func TestScheduleWaitDelayThenToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errBoom := errors.New("boom")
		lim := rate.NewLimiter(rate.Every(10*time.Second), 1)
		lim.Allow()
		p := Policy{Initial: 2 * time.Second, Jitter: NoJitter}
		r, err := NewRetrier(p, WithLimiter(lim))
		if err != nil {
			t.Fatal(err)
		}
		s := r.NewSchedule(time.Now())
		start := time.Now()
		a, _ := s.AdmitKind(start, FirstAttempt)
		d := a.Done(errBoom, start).Delay
		if err := s.wait(t.Context(), d, nil); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 10*time.Second || s.limWait != 8*time.Second {
			t.Fatalf("waited %v (limiter %v), want 2s delay then 8s for the token", got, s.limWait)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(5 * time.Second); cancel() }()
		a, _ = s.AdmitKind(time.Now(), RetryAttempt)
		d = a.Done(errBoom, time.Now()).Delay
		err = s.wait(ctx, d, nil)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Fatalf("wait = %v", err)
		}
		if w := lim.Reserve().Delay(); w < 4990*time.Millisecond || w > 5*time.Second { // float rounding in rate
			t.Fatalf("next token in %v, want 5s: the cancelled token was not given back", w)
		}
	})
}

// openBreaker refuses every attempt.
type openBreaker struct{ asked int }

func (b *openBreaker) Allow() (func(error), error) {
	b.asked++
	return nil, errors.New("open")
}

// A stop the blocking step decides (a refusal under RefuseStop) ends the
// run as Admit's does.
func TestBlockingStopEndsTheRun(t *testing.T) {
	gaveUp := 0
	b := &openBreaker{}
	r, err := NewRetrier(Policy{Initial: time.Second, Jitter: NoJitter}, WithBreaker(b), WithRefusal(GateBreaker, RefuseStop),
		WithObserver(Hooks{GaveUp: func(Event) { gaveUp++ }}))
	if err != nil {
		t.Fatal(err)
	}
	s := r.NewSchedule(time.Now())
	s.Resume(1) // a first attempt failed
	err = s.wait(t.Context(), 0, nil)
	if !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("wait: %v, want the breaker's refusal", err)
	}
	asked, g := b.asked, gaveUp
	if _, d := s.AdmitKind(time.Now(), RetryAttempt); d.Err != err || b.asked != asked || gaveUp != g {
		t.Errorf("Admit after the blocking step stopped: %v (breaker asked %d more, GaveUp %d more), want the same stop, nothing asked or reported",
			d.Err, b.asked-asked, gaveUp-g)
	}
}
