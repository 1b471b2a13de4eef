package rebound_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

var fixed = rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}

// TestDecideLoop walks a loop on the one call: a first attempt, a
// failure, the backoff, a retry, a success.
func TestDecideLoop(t *testing.T) {
	s := newLoop(mustRetrier(t, fixed), t0)
	if d := s.decide(t0, ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("first attempt: %+v", d)
	}
	d := s.decide(t0, failed(errors.New("down")))
	if d.Verdict() != rebound.WaitFor || d.Delay != time.Second || d.Reason != nil || d.Attempt != 1 {
		t.Fatalf("after a failure: %+v, want wait 1s (the backoff), attempt 1", d)
	}
	if d := s.decide(t0.Add(time.Second), ready(rebound.RetryAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("retry: %+v", d)
	}
	if d := s.decide(t0.Add(time.Second), succeeded()); d.Verdict() != rebound.Stop || d.Err != nil || s.Attempts() != 0 {
		t.Fatalf("after a success: %+v, attempts %d", d, s.Attempts())
	}
	// A permanent error stops at once with the error itself.
	perm := errors.New("bad request")
	if d := s.decide(t0, failed(rebound.Permanent(perm))); d.Verdict() != rebound.Stop || d.Err != perm {
		t.Fatalf("permanent: %+v", d)
	}
}

// TestDecideMaxAttempts: the engine counts the attempts, the loop does
// not.
func TestDecideMaxAttempts(t *testing.T) {
	s := newLoop(mustRetrier(t, fixed, rebound.WithMaxAttempts(3)), t0)
	var d rebound.Decision
	for i := range 3 {
		d = s.decide(t0, failed(errors.New("down")))
		if i < 2 && d.Verdict() != rebound.WaitFor {
			t.Fatalf("failure %d: %+v", i+1, d)
		}
	}
	if !errors.Is(d.Err, rebound.ErrExhausted) || d.Verdict() != rebound.Stop || d.Attempt != 3 {
		t.Fatalf("third failure: %+v, want stop ErrExhausted after 3", d)
	}
}

// TestDecideLimiter: a retry waits for its token (Reason nil); a
// second Ready before it comes returns the time left on the same token;
// Abandoned gives it back.
func TestDecideLimiter(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Second), 1)
	r := mustRetrier(t, fixed, rebound.WithLimiter(lim))
	lim.ReserveN(t0, 1) // the burst is spent: the next token at t0+1s
	s := newLoop(r, t0)
	s.decide(t0, failed(errBoom))
	d := s.decide(t0, ready(rebound.RetryAttempt))
	if d.Verdict() != rebound.WaitFor || d.Reason != nil || d.Delay != time.Second {
		t.Fatalf("retry without a token: %+v, want wait 1s for the limiter", d)
	}
	d = s.decide(t0.Add(400*time.Millisecond), ready(rebound.RetryAttempt))
	if d.Verdict() != rebound.WaitFor || d.Delay != 600*time.Millisecond {
		t.Fatalf("asked again after 400ms: %+v, want the 600ms left on the token held", d)
	}
	s.decide(t0.Add(400*time.Millisecond), abandoned())
	// The token given back: another loop gets it at t0+1s, not t0+2s.
	if w := lim.ReserveN(t0.Add(400*time.Millisecond), 1).DelayFrom(t0.Add(400 * time.Millisecond)); w != 600*time.Millisecond {
		t.Fatalf("after Abandoned the next token comes in %v, want 600ms (the token given back)", w)
	}
}

// TestDecideLookup: a lookup takes a token and counts no attempt.
func TestDecideLookup(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Second), 1)
	s := newLoop(mustRetrier(t, fixed, rebound.WithLimiter(lim)), t0)
	if d := s.decide(t0, ready(rebound.LookupAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("first lookup: %+v", d)
	}
	d := s.decide(t0, ready(rebound.LookupAttempt))
	if d.Verdict() != rebound.WaitFor || d.Reason != nil || d.Delay != time.Second {
		t.Fatalf("second lookup at once: %+v, want wait 1s for a token", d)
	}
	if d := s.decide(t0.Add(time.Second), ready(rebound.LookupAttempt)); d.Verdict() != rebound.AttemptNow || s.Attempts() != 0 {
		t.Fatalf("lookup after 1s: %+v, attempts %d (want 0: a lookup is not an attempt of the run)", d, s.Attempts())
	}
}

// TestDecideRefusalRules: the budget's refusal under each rule.
func TestDecideRefusalRules(t *testing.T) {
	for _, tc := range []struct {
		rule    rebound.Refusal
		verdict rebound.Verdict
	}{
		{rebound.RefuseStop, rebound.Stop},
		{rebound.RefuseDefer, rebound.WaitFor},
		{rebound.RefuseDrop, rebound.Stop},
	} {
		b, err := rebound.NewRetryBudget(0.000001, 0.000001, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s := newLoop(mustRetrier(t, fixed, rebound.WithBudget(b), rebound.WithRefusal(rebound.GateBudget, tc.rule)), t0)
		if d := s.decide(t0, ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("%v: first attempt %+v", tc.rule, d)
		}
		d := s.decide(t0, failed(errors.New("down")))
		if tc.rule == rebound.RefuseStop { // known at the failure: no wait to learn it
			if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrBudgetExhausted) {
				t.Fatalf("stop rule, after the failure: %+v", d)
			}
			continue
		}
		if d.Verdict() != rebound.WaitFor {
			t.Fatalf("%v: after the failure %+v", tc.rule, d)
		}
		d = s.decide(t0.Add(time.Second), ready(rebound.RetryAttempt))
		if d.Verdict() != tc.verdict {
			t.Fatalf("rule %v: retry refused by the budget: %+v, want %v", tc.rule, d, tc.verdict)
		}
		switch tc.rule {
		case rebound.RefuseDefer:
			if d.Reason != rebound.ErrBudgetExhausted || d.Delay != time.Second || d.Attempt != 2 {
				t.Fatalf("defer: %+v, want a wait of the next backoff delay, the refusal counted as attempt 2", d)
			}
		case rebound.RefuseDrop:
			if !errors.Is(d.Err, rebound.ErrBudgetExhausted) || d.Reason != rebound.ErrBudgetExhausted {
				t.Fatalf("drop: %+v, want Stop with the refusal as Reason", d)
			}
		}
	}
}

// TestDecideAdmissionPerKind: WithAdmission(FirstAttempt, GateBudget)
// lets first attempts through a throttle that rejects everything, and
// the throttle still refuses retries.
func TestDecideAdmissionPerKind(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(1, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	// Teach the throttle that the backend rejects everything.
	for i := range 1000 {
		th.Allow(t0.Add(time.Duration(i) * time.Millisecond))
	}
	now := t0.Add(time.Second)
	plain := newLoop(mustRetrier(t, fixed, rebound.WithThrottle(th)), now)
	refused := 0
	for range 50 {
		if d := plain.decide(now, ready(rebound.FirstAttempt)); d.Verdict() == rebound.WaitFor {
			refused++
		}
		plain.Reset(now)
	}
	if refused == 0 {
		t.Fatal("the default admission sent every first attempt through a throttle that rejects most: the test proves nothing")
	}
	s := newLoop(mustRetrier(t, fixed, rebound.WithThrottle(th), rebound.WithAdmission(rebound.FirstAttempt, rebound.GateBudget)), now)
	for range 50 {
		if d := s.decide(now, ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
			t.Fatalf("first attempt with the throttle out of its admission: %+v", d)
		}
		s.Reset(now)
	}
}

// TestDecideBadInput: the options name the argument and the rule.
func TestDecideBadInput(t *testing.T) {
	for _, o := range []rebound.Option{
		rebound.WithAdmission(7, rebound.GateLimiter),
		rebound.WithAdmission(rebound.RetryAttempt, 0x80),
		rebound.WithAdmission(rebound.LookupAttempt, rebound.GateBreaker),
		rebound.WithRefusal(rebound.GateLimiter, rebound.RefuseStop),
		rebound.WithRefusal(rebound.GateBudget, 9),
	} {
		_, err := rebound.NewRetrier(fixed, o)
		if ae, ok := errors.AsType[*rebound.ArgumentError](err); !ok || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Reason == "" {
			t.Errorf("%v: want an *ArgumentError with a reason", err)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	r, err := rebound.NewRetrier(fixed)
	if err != nil {
		b.Fatal(err)
	}
	s := r.NewSchedule(t0)
	fail := errors.New("down")
	b.ReportAllocs()
	for b.Loop() {
		a, _ := s.AdmitKind(t0, rebound.FirstAttempt)
		a.Done(fail, t0)
		a, _ = s.AdmitKind(t0, rebound.RetryAttempt)
		a.Done(nil, t0)
	}
}

// TestDecideRetryDueAfterMaxElapsed: a retry that comes due after
// MaxElapsed (its scheduler was late) is not made; the engine says so, the
// loop does not check MaxElapsed itself.
func TestDecideRetryDueAfterMaxElapsed(t *testing.T) {
	s := newLoop(mustRetrier(t, fixed, rebound.WithMaxElapsed(10*time.Second)), t0)
	if d := s.decide(t0, failed(errors.New("down"))); d.Verdict() != rebound.WaitFor {
		t.Fatalf("after the failure: %+v", d)
	}
	d := s.decide(t0.Add(11*time.Second), ready(rebound.RetryAttempt))
	if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrExhausted) || !strings.Contains(d.Err.Error(), "after MaxElapsed") {
		t.Fatalf("retry due 11 s after the start with MaxElapsed 10 s: %+v, want a stop naming MaxElapsed", d)
	}
	s.Reset(t0)
	s.decide(t0, failed(errors.New("down")))
	if d := s.decide(t0.Add(9*time.Second), ready(rebound.RetryAttempt)); d.Verdict() != rebound.AttemptNow {
		t.Fatalf("retry due within MaxElapsed: %+v", d)
	}
}

// TestFirstAttemptDepositsWhateverTheThrottle: a deposit is the arrival of
// work, made before the throttle is asked, so a caller that sends its first
// attempt whatever the throttle says (failback's Invoke) keeps the budget's
// count of work right; only a retry's withdrawal waits for the throttle.
func TestFirstAttemptDepositsWhateverTheThrottle(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(1, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 { // the backend rejected everything
		th.Allow(t0.Add(time.Duration(i) * time.Millisecond))
	}
	b, err := rebound.NewRetryBudget(1, 0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	r := mustRetrier(t, fixed, rebound.WithBudget(b), rebound.WithThrottle(th))
	refused := 0
	for range 50 {
		if r.Begin(now) != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the throttle refused no first attempt: the test proves nothing")
	}
	for i := range 50 {
		if !b.TryWithdraw(now) {
			t.Fatalf("withdrawal %d refused: %d of 50 first attempts were refused by the throttle and made no deposit", i+1, refused)
		}
	}
}

// The handle: Admit returns the Attempt only with AttemptNow; its Done
// decides what follows; a refusal that ends the run names itself in
// Decision.Reason.
func TestAdmitThenDone(t *testing.T) {
	b := &fakeBreaker{open: true}
	r := mustRetrier(t, fixed, rebound.WithBreaker(b), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop))
	s := r.NewSchedule(t0)
	a, d := s.AdmitKind(t0, rebound.FirstAttempt)
	if d.Verdict() != rebound.Stop || a != (rebound.Attempt{}) || !errors.Is(d.Reason, rebound.ErrBreakerOpen) || !errors.Is(d.Err, rebound.ErrBreakerOpen) {
		t.Fatalf("refused first attempt: %+v, attempt %v; want Stop, no Attempt, the refusal as Reason", d, a)
	}
	b.open = false
	s.Reset(t0)
	a, d = s.AdmitKind(t0, rebound.FirstAttempt)
	if d.Verdict() != rebound.AttemptNow || a == (rebound.Attempt{}) {
		t.Fatalf("first attempt: %+v", d)
	}
	if d = a.Done(errBoom, t0); d.Verdict() != rebound.WaitFor || d.Delay != time.Second || d.Reason != nil || d.Attempt != 1 {
		t.Fatalf("Done(failure): %+v, want wait 1s, attempt 1", d)
	}
	a, _ = s.AdmitKind(t0.Add(time.Second), rebound.RetryAttempt)
	if d = a.Done(nil, t0.Add(time.Second)); d.Verdict() != rebound.Stop || d.Err != nil || s.Attempts() != 0 {
		t.Fatalf("Done(nil): %+v, attempts %d; want Stop with a nil Err, a new run", d, s.Attempts())
	}
	if len(b.result) != 2 || b.result[0] != errBoom || b.result[1] != nil {
		t.Fatalf("the breaker heard %v, want [boom nil]", b.result)
	}
}
