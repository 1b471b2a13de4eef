package rebound_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Admit infers the kind of the attempt from the run: a first attempt
// after NewSchedule, Reset or a success; a retry after a failure, a
// local refusal or Resume.
func TestAdmitInfersTheKind(t *testing.T) {
	th := rejectingThrottle(t) // refuses every attempt it is asked for
	r := mustRetrier(t, fixed, rebound.WithThrottle(th))
	plain := mustRetrier(t, fixed)
	s := plain.NewSchedule(t0)
	want := func(step string, k rebound.AttemptKind) {
		t.Helper()
		if got := s.Kind(); got != k {
			t.Errorf("after %s: the next attempt is kind %d, want %d", step, got, k)
		}
	}
	want("NewSchedule", rebound.FirstAttempt)
	a, _ := s.Admit(t0)
	a.Done(errBoom, t0)
	want("a failure", rebound.RetryAttempt)
	a, _ = s.Admit(t0)
	a.Done(nil, t0)
	want("a success", rebound.FirstAttempt)
	a, _ = s.Admit(t0)
	a.Done(errBoom, t0)
	s.Reset(t0)
	want("Reset", rebound.FirstAttempt)
	s.Resume(3)
	want("Resume(3)", rebound.RetryAttempt)
	s = plain.NewSchedule(t0)
	s.Resume(0) // a call restored before any attempt (an outbox's): a retry, as before the restart
	want("Resume(0)", rebound.RetryAttempt)
	a, _ = s.Admit(t0)
	a.Done(nil, t0)
	want("a success after Resume", rebound.FirstAttempt)

	s = r.NewSchedule(t0)
	if _, d := s.Admit(t0); d.Stop || d.Delay <= 0 || !errors.Is(d.Reason, rebound.ErrThrottled) {
		t.Fatalf("first Admit, the throttle refusing: %+v, want a deferral", d)
	}
	want("a local refusal", rebound.RetryAttempt)
}

// What Admit infers has the gates of that kind: with the limiter's token
// taken, a first attempt (no token by default) is admitted at once, and a
// retry after its failure waits for a token.
func TestAdmitInferredKindHasItsGates(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Second), 1)
	lim.ReserveN(t0, 1) // the next token at t0+1s
	s := mustRetrier(t, fixed, rebound.WithLimiter(lim)).NewSchedule(t0)
	a, d := s.Admit(t0)
	if d.Stop || d.Delay != 0 || a == (rebound.Attempt{}) {
		t.Fatalf("first attempt: %+v, want admitted now (a first attempt takes no token)", d)
	}
	d = a.Done(errBoom, t0)
	if d.Stop || d.Delay <= 0 {
		t.Fatalf("Done(failure): %+v, want a wait", d)
	}
	if a, d = s.Admit(t0); d.Stop || d.Delay != time.Second || d.Reason != nil || a != (rebound.Attempt{}) {
		t.Fatalf("retry: %+v, want a wait of 1s for its token, Reason nil, no Attempt", d)
	}
}

// A Decision says one of three things, and a loop tells them apart from
// its fields: Stop; a wait (Delay > 0, never 0); or, from Admit only,
// admitted (Delay 0, with a non-zero Attempt). Every answer of loops with
// each gate refusing or waiting, at the smallest delay a Policy allows,
// is one of the three.
func TestDecisionIsUnambiguous(t *testing.T) {
	tiny := rebound.Policy{Initial: rebound.MinDelay, Max: rebound.MinDelay, Jitter: rebound.FullJitter}
	for i, opts := range [][]rebound.Option{
		nil,
		{rebound.WithLimiter(rate.NewLimiter(rate.Every(time.Second), 1))},
		{rebound.WithThrottle(rejectingThrottle(t))},
		{rebound.WithBudget(mustBudget(t, 0, 1, 10*time.Second)), rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer)},
		{rebound.WithBreaker(&fakeBreaker{open: true})},
		{rebound.WithMaxAttempts(7)},
		{rebound.WithMaxElapsed(time.Second), rebound.WithLimiter(rate.NewLimiter(rate.Every(300*time.Millisecond), 1))},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			s := mustRetrier(t, tiny, opts...).NewSchedule(t0)
			now := t0
			for step := 0; step < 200; step++ {
				a, d := s.Admit(now)
				admitted := !d.Stop && d.Delay == 0
				if admitted != (a != rebound.Attempt{}) || d.Delay < 0 {
					t.Fatalf("step %d: Admit = %+v with Attempt %v: admitted must come with an Attempt, and only then", step, d, a != rebound.Attempt{})
				}
				if admitted {
					err := errBoom
					if step%9 == 8 {
						err = nil
					}
					d = a.Done(err, now)
					if !d.Stop && d.Delay <= 0 {
						t.Fatalf("step %d: Done = %+v: a wait with no Delay", step, d)
					}
				}
				if d.Stop {
					s.Reset(now)
					continue
				}
				now = now.Add(d.Delay)
			}
		})
	}
}
