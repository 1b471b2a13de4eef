package rebound_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// After a Stop, a Ready that comes anyway (a heap scheduler's stale
// wake-up) gets the same Stop, reported once, until Reset: no attempt is
// admitted beyond MaxAttempts, after a permanent error, or past a refusal
// that ended the loop.
func TestDecideReadyAfterStop(t *testing.T) {
	p, limit := fixed, rebound.WithMaxAttempts(2)
	for _, tc := range []struct {
		name string
		opts []rebound.Option
		stop func(s *loop) rebound.Decision
	}{
		{"MaxAttempts", nil, func(s *loop) rebound.Decision {
			s.decide(t0, failed(errBoom))
			return s.decide(t0, failed(errBoom))
		}},
		{"permanent", nil, func(s *loop) rebound.Decision {
			return s.decide(t0, failed(rebound.Permanent(errors.New("bad request"))))
		}},
		{"refusal", []rebound.Option{rebound.WithBreaker(&fakeBreaker{open: true}), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop)},
			func(s *loop) rebound.Decision { return s.decide(t0, ready(rebound.FirstAttempt)) }},
		{"drop", []rebound.Option{rebound.WithBreaker(&fakeBreaker{open: true}), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseDrop)},
			func(s *loop) rebound.Decision { return s.decide(t0, ready(rebound.FirstAttempt)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hookCount
			s := newLoop(mustRetrier(t, p, append(tc.opts, h.hooks(), limit)...), t0)
			first := tc.stop(s)
			if first.Verdict() != rebound.Stop {
				t.Fatalf("%+v, want the loop ended", first)
			}
			gaveUp, attempts := h.gaveUp, s.Attempts()
			for _, k := range []rebound.AttemptKind{rebound.RetryAttempt, rebound.FirstAttempt} {
				d := s.decide(t0.Add(time.Minute), ready(k))
				if d.Verdict() != first.Verdict() || d.Err != first.Err {
					t.Errorf("Ready(%v) after the loop ended: %+v, want %v again with %v", k, d, first.Verdict(), first.Err)
				}
			}
			if _, err := s.admit(t0.Add(time.Minute)); err != first.Err || s.throttled() {
				t.Errorf("Admit after the loop ended: %v, Throttled %v; want %v, and nothing rejected locally", err, s.throttled(), first.Err)
			}
			if h.gaveUp != gaveUp || s.Attempts() != attempts {
				t.Errorf("GaveUp %d, attempts %d after the repeats; want %d and %d (nothing new)", h.gaveUp, s.Attempts(), gaveUp, attempts)
			}
			s.Reset(t0.Add(time.Minute))
			if tc.opts == nil {
				if d := s.decide(t0.Add(time.Minute), ready(rebound.FirstAttempt)); d.Verdict() != rebound.AttemptNow {
					t.Errorf("after Reset: %+v, want a new run", d)
				}
			}
		})
	}
}

// A zero Schedule (not made by Retrier.NewSchedule) and a zero Attempt
// are bad input: an *ArgumentError naming them, never a panic.
func TestScheduleBadInput(t *testing.T) {
	var s rebound.Schedule
	check := func(name string, err error) {
		t.Helper()
		if ae, ok := errors.AsType[*rebound.ArgumentError](err); !ok || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Arg == "" {
			t.Errorf("%s: %v, want an *ArgumentError", name, err)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("zero Schedule: panic %v", p)
			}
		}()
		a, d := s.AdmitKind(t0, rebound.FirstAttempt)
		if d.Verdict() != rebound.Stop || a != (rebound.Attempt{}) {
			t.Errorf("Admit on a zero Schedule: %+v, want Stop", d)
		}
		check("Admit", d.Err)
		_, d = s.AdmitKind(t0, rebound.RetryAttempt)
		check("Admit(RetryAttempt)", d.Err)
		_, d = s.AdmitKind(t0, rebound.LookupAttempt)
		check("Admit(LookupAttempt)", d.Err)
		check("Attempt{}.Done(err)", a.Done(errBoom, t0).Err)
		check("Attempt{}.Done(nil)", a.Done(nil, t0).Err)
		s.Reset(t0)
		s.Cancel(t0)
	}()
}

// A stop the blocking step decides (Retrier.Do's; a refusal under
// RefuseStop) ends the run as Admit's does: see
// TestBlockingStopEndsTheRun (wait_internal_test.go).

// A GaveUp hook that panics (its caller recovering) still leaves the run
// ended: the next Ready asks no gate again.
func TestDecideStopHookPanics(t *testing.T) {
	b := &fakeBreaker{open: true}
	s := newLoop(mustRetrier(t, fixed, rebound.WithBreaker(b), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop),
		rebound.WithObserver(rebound.Hooks{GaveUp: func(rebound.Event) { panic("hook") }})), t0)
	func() {
		defer func() { _ = recover() }()
		s.decide(t0, ready(rebound.FirstAttempt))
	}()
	if d := s.decide(t0, ready(rebound.RetryAttempt)); d.Verdict() != rebound.Stop || b.asked != 1 {
		t.Errorf("Ready after the stop: %+v, breaker asked %d times; want the stop again, asked once", d, b.asked)
	}
}
