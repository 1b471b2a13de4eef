package rebound_test

// Attacks on the engine's one door (Schedule.Admit -> Attempt.Done), written
// by a reviewer from `go doc` and docs/engine.md. Every test here runs in
// passed-in times (no wall clock) and fails on a defect of the library.

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

var (
	bk3T0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errBk3    = errors.New("bk3: unreachable")
	errBk3Off = errors.New("bk3: breaker open")
)

// bk3Breaker is a counting Breaker: it records every admission and every
// report of an admission's end, in order.
type bk3Breaker struct {
	mu      sync.Mutex
	refuse  bool
	allows  int
	refused int
	ends    []error // what each done received, in call order
}

func (b *bk3Breaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse {
		b.refused++
		return nil, errBk3Off
	}
	b.allows++
	n := b.allows
	return func(err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		_ = n
		b.ends = append(b.ends, err)
	}, nil
}

func (b *bk3Breaker) counts() (allows, refused int, ends []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allows, b.refused, append([]error(nil), b.ends...)
}

// bk3Hooks counts each kind of event.
type bk3Hooks struct {
	mu                                          sync.Mutex
	attempted, retried, gaveUp, throttled, recd int
}

func (h *bk3Hooks) hooks() rebound.Hooks {
	inc := func(p *int) func(rebound.Event) {
		return func(rebound.Event) { h.mu.Lock(); *p++; h.mu.Unlock() }
	}
	return rebound.Hooks{Attempted: inc(&h.attempted), Retried: inc(&h.retried), GaveUp: inc(&h.gaveUp),
		Throttled: inc(&h.throttled), Recovered: inc(&h.recd)}
}

func bk3Retrier(t *testing.T, p rebound.Policy, opts ...rebound.Option) *rebound.Retrier {
	t.Helper()
	r, err := rebound.NewRetrier(p, opts...)
	if err != nil {
		t.Fatalf("NewRetrier: %v", err)
	}
	return r
}

var bk3Policy = rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}

// Attempt.Done called twice on one Attempt: the second report is taken as a
// second failed attempt of the run (Attempts 2, Attempted reported twice),
// though only one attempt was admitted and made. The Attempt carries no
// identity, so nothing tells the Schedule the report is stale.
func TestDoneTwiceCountsTwoFailures(t *testing.T) {
	var h bk3Hooks
	r := bk3Retrier(t, bk3Policy, rebound.WithObserver(h.hooks()))
	s := r.NewSchedule(bk3T0)
	a, d := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	if d.Verdict() != rebound.AttemptNow {
		t.Fatalf("Admit = %+v", d)
	}
	a.Done(errBk3, bk3T0)
	d2 := a.Done(errBk3, bk3T0) // the same attempt reported again
	if s.Attempts() != 1 || h.attempted != 1 || h.retried != 1 {
		t.Fatalf("after one attempt reported twice: Attempts() = %d, Attempted hooks %d, Retried hooks %d, second Done = %+v; want 1, 1, 1 (the second report ignored or refused)",
			s.Attempts(), h.attempted, h.retried, d2)
	}
}

// An Attempt admitted before Reset and reported after it is counted as a
// failure of the NEW run, which has admitted nothing yet.
func TestStaleAttemptAfterResetCountsInNewRun(t *testing.T) {
	r := bk3Retrier(t, bk3Policy)
	s := r.NewSchedule(bk3T0)
	old, d := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	if d.Verdict() != rebound.AttemptNow {
		t.Fatalf("Admit = %+v", d)
	}
	s.Reset(bk3T0.Add(time.Second)) // a new run; the old attempt is abandoned
	d = old.Done(errBk3, bk3T0.Add(2*time.Second))
	if s.Attempts() != 0 {
		t.Fatalf("a stale Attempt's Done after Reset: Attempts() = %d, Done = %+v; want 0 (the new run has made no attempt)", s.Attempts(), d)
	}
}

// A run ended by MaxAttempts stays ended until Reset (docs/engine.md: "no
// attempt is admitted past MaxAttempts ... until Reset"). A stale Done(nil)
// of the run's last Attempt silently starts a new run, and the next Admit
// admits an attempt past MaxAttempts.
func TestStaleSuccessReopensEndedRun(t *testing.T) {
	r := bk3Retrier(t, bk3Policy, rebound.WithMaxAttempts(1))
	s := r.NewSchedule(bk3T0)
	a, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	d := a.Done(errBk3, bk3T0)
	if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrExhausted) {
		t.Fatalf("Done = %+v, want Stop ErrExhausted", d)
	}
	a.Done(nil, bk3T0) // stale: the attempt was already reported
	if _, d = s.AdmitKind(bk3T0.Add(time.Second), rebound.RetryAttempt); d.Verdict() != rebound.Stop {
		t.Fatalf("Admit after the run ended on MaxAttempts and a stale Done(nil) = %+v; want Stop (the run ended, no Reset)", d)
	}
}

// Done on an Attempt after Cancel, once the next attempt was admitted: the
// breaker hears the stale attempt's error as the end of the NEW admission,
// and never hears that the new attempt succeeded. Both Attempts are equal
// values, so a caller cannot tell them apart either.
func TestStaleDoneMisreportsBreakerAdmission(t *testing.T) {
	var b bk3Breaker
	r := bk3Retrier(t, bk3Policy, rebound.WithBreaker(&b))
	s := r.NewSchedule(bk3T0)
	a1, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	s.Cancel(bk3T0) // a1 will not be made: its admission goes back (context.Canceled)
	a2, d := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	if d.Verdict() != rebound.AttemptNow {
		t.Fatalf("Admit = %+v", d)
	}
	a1.Done(errBk3, bk3T0) // a late report of the cancelled attempt
	a2.Done(nil, bk3T0)    // the new attempt succeeded
	_, _, ends := b.counts()
	if len(ends) != 2 || ends[1] != nil {
		t.Fatalf("breaker ends = %v (a1 == a2: %v); want [context.Canceled <nil>]: the second admission's end is the success of a2", ends, a1 == a2)
	}
}

// A retry the breaker refuses is not sent, yet the throttle counted it as a
// request (the throttle is asked and told "sent" before the limiter and the
// breaker). docs/engine.md: one the budget refuses "is not sent either, so
// it is no request in the throttle's count"; a breaker refusal is not sent
// either. With the breaker open for a while, the throttle's window fills
// with requests that never reached the backend and were never answered, so
// it rejects once the breaker lets attempts through again.
func TestBreakerRefusalsCountAsThrottleRequests(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, time.Minute, seeded(7))
	if err != nil {
		t.Fatal(err)
	}
	b := &bk3Breaker{refuse: true}
	p := rebound.Policy{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: rebound.NoJitter}
	r := bk3Retrier(t, p, rebound.WithThrottle(th), rebound.WithBreaker(b))
	s := r.NewSchedule(bk3T0)
	now := bk3T0
	for i := 0; i < 40; i++ {
		_, d := s.AdmitKind(now, rebound.RetryAttempt)
		if errors.Is(d.Reason, rebound.ErrThrottled) {
			t.Fatalf("Admit %d refused by the THROTTLE (probability %.3f) after %d refusals by the breaker and no request sent to the backend; want a deferral by the breaker: a refused attempt is no request",
				i, th.Probability(now), i)
		}
		if d.Verdict() != rebound.WaitFor || !errors.Is(d.Reason, rebound.ErrBreakerOpen) {
			t.Fatalf("Admit %d = %+v, want a deferral by the breaker", i, d)
		}
		now = now.Add(d.Delay)
	}
	if _, refused, _ := b.counts(); refused != 40 {
		t.Fatalf("breaker refusals %d", refused)
	}
	if p := th.Probability(now); p != 0 {
		t.Fatalf("throttle rejection probability = %.3f after 40 attempts the breaker refused (none sent); want 0: a refused attempt is no request", p)
	}
}

// An attempt whose limiter token wait is abandoned (Cancel) was never sent:
// the token goes back, but the budget withdrawal it made stays spent, and
// when the run goes on ("Cancel ... The run goes on") the same retry is
// charged to the budget again: one retry costs two withdrawals.
func TestCancelThenAdmitChargesBudgetTwice(t *testing.T) {
	b, err := rebound.NewRetryBudget(0, 1, 10*time.Second) // 10 retries per window, no deposits needed
	if err != nil {
		t.Fatal(err)
	}
	lim := rate.NewLimiter(rate.Every(time.Minute), 1)
	lim.ReserveN(bk3T0, 1) // the only token is taken: the next comes in a minute
	r := bk3Retrier(t, bk3Policy, rebound.WithBudget(b), rebound.WithLimiter(lim),
		rebound.WithRefusal(rebound.GateBudget, rebound.RefuseDefer))
	s := r.NewSchedule(bk3T0)
	a, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	d := a.Done(errBk3, bk3T0)
	now := bk3T0.Add(d.Delay)
	before := b.Balance(now)
	if _, d = s.AdmitKind(now, rebound.RetryAttempt); d.Verdict() != rebound.WaitFor || d.Reason != nil {
		t.Fatalf("Admit = %+v, want a token wait", d)
	}
	s.Cancel(now) // the wait is abandoned; the run goes on
	if _, d = s.AdmitKind(now, rebound.RetryAttempt); d.Verdict() != rebound.WaitFor || d.Reason != nil {
		t.Fatalf("Admit after Cancel = %+v, want a token wait", d)
	}
	if got := before - b.Balance(now); got != 1 {
		t.Fatalf("one retry, not yet sent, drew %d withdrawals from the budget; want 1 (each gate asked once per attempt)", got)
	}
}

// Resume restores a run that failed n times; a Schedule whose policy allows
// fewer attempts than that (a policy lowered between restarts, a damaged
// record) still admits the next attempt, past MaxAttempts (docs/engine.md:
// "no attempt is admitted past MaxAttempts").
func TestResumePastMaxAttemptsAdmits(t *testing.T) {
	r := bk3Retrier(t, bk3Policy, rebound.WithMaxAttempts(3))
	s := r.NewSchedule(bk3T0)
	s.Resume(5)
	if _, d := s.AdmitKind(bk3T0, rebound.RetryAttempt); d.Verdict() == rebound.AttemptNow {
		t.Fatalf("Admit after Resume(5) with MaxAttempts 3 = %+v (Attempts %d); want Stop ErrExhausted", d, s.Attempts())
	}
}

// A Permanent mark whose error is nil (a *backoff.PermanentError built by
// hand, which IsPermanent reports as permanent) is retried: Done returns
// WaitFor with a Delay of 0 -- a busy-spin (DESIGN.md: delay arithmetic
// "never yields a negative or zero delay") -- instead of stopping the loop.
func TestPermanentNilErrIsRetried(t *testing.T) {
	r := bk3Retrier(t, bk3Policy)
	s := r.NewSchedule(bk3T0)
	a, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	perm := &backoff.PermanentError{}
	if !rebound.IsPermanent(perm) {
		t.Fatal("IsPermanent = false")
	}
	if d := a.Done(perm, bk3T0); d.Verdict() != rebound.Stop && !(d.Verdict() == rebound.WaitFor && d.Delay >= rebound.MinDelay) {
		t.Fatalf("Done(a Permanent error) = %+v; want Stop", d)
	}
}

// A lookup the throttle refuses under RefuseStop leaves the run as it is
// (the run goes on and is admitted), yet Admit reports it to GaveUp: the
// run then reports a second GaveUp when it really gives up, so a give-up
// counter counts two for one run.
func TestLookupRefusalReportsGaveUp(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100000; i++ {
		th.Allow(bk3T0) // the backend rejects everything
	}
	var h bk3Hooks
	r := bk3Retrier(t, bk3Policy, rebound.WithMaxAttempts(1), rebound.WithThrottle(th), rebound.WithObserver(h.hooks()),
		rebound.WithRefusal(rebound.GateThrottle, rebound.RefuseStop),
		rebound.WithAdmission(rebound.LookupAttempt, rebound.GateThrottle),
		rebound.WithAdmission(rebound.FirstAttempt, 0))
	s := r.NewSchedule(bk3T0)
	if _, d := s.AdmitKind(bk3T0, rebound.LookupAttempt); d.Verdict() != rebound.Stop {
		t.Fatalf("lookup Admit = %+v, want Stop ErrThrottled", d)
	}
	a, d := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	if d.Verdict() != rebound.AttemptNow {
		t.Fatalf("the run after a refused lookup: Admit = %+v", d)
	}
	a.Done(errBk3, bk3T0) // MaxAttempts 1: the run gives up
	if h.gaveUp != 1 {
		t.Fatalf("one run that gave up once, beside one refused lookup: GaveUp reported %d times; want 1", h.gaveUp)
	}
}

// docs/engine.md rule 4: the MaxElapsed stop's text "names a Retry-After
// that caused it". When the backoff draw alone passes MaxElapsed and the
// Retry-After (clamped to MaxRetryAfter) is shorter than the draw, the stop
// still blames the Retry-After, and names the clamped value as what the
// server asked for ("server asked to retry after 10s, beyond MaxElapsed
// 30s": 10s is not beyond 30s, and the server asked 2m).
func TestRetryAfterBlamedForBackoffStop(t *testing.T) {
	p := rebound.Policy{Initial: time.Minute, Max: time.Minute, Jitter: rebound.NoJitter, MaxRetryAfter: 10 * time.Second}
	r := bk3Retrier(t, p, rebound.WithMaxElapsed(30*time.Second))
	s := r.NewSchedule(bk3T0)
	a, _ := s.AdmitKind(bk3T0, rebound.FirstAttempt)
	d := a.Done(rebound.RetryAfter(2*time.Minute, errBk3), bk3T0)
	if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrExhausted) {
		t.Fatalf("Done = %+v", d)
	}
	if msg := d.Err.Error(); strings.Contains(msg, "server asked to retry after 10s") {
		t.Fatalf("stop caused by the 1m backoff delay blames a Retry-After: %q", msg)
	}
}
