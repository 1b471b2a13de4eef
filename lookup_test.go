package rebound_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// A lookup beside the run, while the run's retry waits for its token:
// each holds its own token, and the retry's admission (its budget
// withdrawal) is not made twice.
func TestDecideLookupBesideAPendingRetry(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Second), 1)
	lim.ReserveN(t0, 1)
	lim.ReserveN(t0, 1) // the next token at t0+2s
	b := mustBudget(t, 0, 1, 10*time.Second)
	s := newLoop(mustRetrier(t, fixed, rebound.WithLimiter(lim), rebound.WithBudget(b),
		rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer)), t0)
	s.decide(t0, failed(errBoom))
	t1 := t0.Add(time.Second)
	before := b.Balance(t1)
	if d := s.decide(t1, ready(rebound.RetryAttempt)); d.Verdict() != rebound.WaitFor || d.Delay != time.Second {
		t.Fatalf("retry: %+v, want a wait of 1s for its token", d)
	}
	if d := s.decide(t1, ready(rebound.LookupAttempt)); d.Verdict() != rebound.WaitFor || d.Delay != 2*time.Second {
		t.Fatalf("lookup beside it: %+v, want a wait of 2s for a token of its own (the retry holds the one at +1s)", d)
	}
	t2 := t0.Add(2 * time.Second)
	if d := s.decide(t2, ready(rebound.RetryAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("retry when its token is due: %+v", d)
	}
	if got := b.Balance(t2); got != before-1 {
		t.Errorf("budget balance %d after one retry, want %d (one withdrawal)", got, before-1)
	}
	t3 := t0.Add(3 * time.Second)
	if d := s.decide(t3, ready(rebound.LookupAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("lookup when its token is due: %+v", d)
	}
	if w := lim.ReserveN(t3, 1).DelayFrom(t3); w != time.Second {
		t.Errorf("next token in %v, want 1s: two tokens taken, one each", w)
	}
}

// rejectingThrottle returns a throttle taught that the backend rejects
// every request.
func rejectingThrottle(t *testing.T) *rebound.AdaptiveThrottle {
	return rejectingThrottleAt(t, t0)
}

// rejectingThrottleAt is rejectingThrottle taught in the second before
// end.
func rejectingThrottleAt(t *testing.T, end time.Time) *rebound.AdaptiveThrottle {
	th, err := rebound.NewAdaptiveThrottle(1, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		th.Allow(end.Add(time.Duration(i-1000) * time.Millisecond))
	}
	return th
}

// A lookup the throttle refuses is not an attempt of the run: no attempt
// counted, the run's token and breaker admission kept.
func TestDecideLookupRefusedLeavesTheRun(t *testing.T) {
	th := rejectingThrottle(t)
	now := t0.Add(time.Second)
	lim := rate.NewLimiter(rate.Every(time.Second), 1)
	br := &fakeBreaker{}
	s := newLoop(mustRetrier(t, fixed, rebound.WithThrottle(th), rebound.WithLimiter(lim), rebound.WithBreaker(br),
		rebound.WithAdmission(rebound.RetryAttempt, rebound.GateLimiter|rebound.GateBreaker),
		rebound.WithAdmission(rebound.LookupAttempt, rebound.GateThrottle)), now)
	s.decide(now, failed(errBoom))
	if d := s.decide(now, ready(rebound.RetryAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("retry: %+v", d)
	}
	refused := 0
	for range 20 {
		d := s.decide(now, ready(rebound.LookupAttempt))
		if d.Verdict() == rebound.WaitFor && d.Reason == rebound.ErrThrottled {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no lookup refused by a throttle that rejects most: the test proves nothing")
	}
	if s.Attempts() != 1 || len(br.result) != 0 {
		t.Errorf("after %d lookups refused: attempts %d, breaker told %v; want 1 and nothing (the run's attempt is still admitted)",
			refused, s.Attempts(), br.result)
	}
	s.decide(now, failed(errors.New("down")))
	if len(br.result) != 1 {
		t.Errorf("the retry's end reached the breaker %d times, want 1", len(br.result))
	}
}

// A lookup that passes the throttle reports its outcome (LookedUp): the
// throttle hears its accept, so lookups that succeed do not teach it that
// the backend rejects everything.
func TestDecideLookupOutcomeReachesTheThrottle(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newLoop(mustRetrier(t, fixed, rebound.WithThrottle(th),
		rebound.WithAdmission(rebound.LookupAttempt, rebound.GateThrottle)), t0)
	for i := range 200 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if d := s.decide(now, ready(rebound.LookupAttempt)); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("lookup %d: %+v: the throttle refuses lookups that all succeed", i, d)
		}
		if d := s.decide(now, lookedUp(nil)); d.Verdict() != rebound.Stop || d.Err != nil || s.Attempts() != 0 {
			t.Fatalf("LookedUp: %+v, attempts %d", d, s.Attempts())
		}
	}
	if p := th.Probability(t0.Add(20 * time.Second)); p != 0 {
		t.Errorf("after 200 lookups that succeeded the throttle rejects with probability %v, want 0", p)
	}
}
