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
	p := fixed
	p.MaxAttempts = 2
	for _, tc := range []struct {
		name string
		opts []rebound.Option
		stop func(s *rebound.Schedule) rebound.Decision
	}{
		{"MaxAttempts", nil, func(s *rebound.Schedule) rebound.Decision {
			s.Decide(t0, rebound.Failed(nil))
			return s.Decide(t0, rebound.Failed(nil))
		}},
		{"permanent", nil, func(s *rebound.Schedule) rebound.Decision {
			return s.Decide(t0, rebound.Failed(rebound.Permanent(errors.New("bad request"))))
		}},
		{"refusal", []rebound.Option{rebound.WithBreaker(&fakeBreaker{open: true}), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop)},
			func(s *rebound.Schedule) rebound.Decision { return s.Decide(t0, rebound.Ready(rebound.FirstAttempt)) }},
		{"drop", []rebound.Option{rebound.WithBreaker(&fakeBreaker{open: true}), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseDrop)},
			func(s *rebound.Schedule) rebound.Decision { return s.Decide(t0, rebound.Ready(rebound.FirstAttempt)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hookCount
			s := mustRetrier(t, p, append(tc.opts, h.hooks())...).NewSchedule(t0)
			first := tc.stop(s)
			if first.Verdict != rebound.Stop && first.Verdict != rebound.Drop {
				t.Fatalf("%+v, want the loop ended", first)
			}
			gaveUp, attempts := h.gaveUp, s.Attempts()
			for _, k := range []rebound.AttemptKind{rebound.RetryAttempt, rebound.FirstAttempt} {
				d := s.Decide(t0.Add(time.Minute), rebound.Ready(k))
				if d.Verdict != first.Verdict || d.Err != first.Err {
					t.Errorf("Ready(%v) after the loop ended: %+v, want %v again with %v", k, d, first.Verdict, first.Err)
				}
			}
			if _, err := s.Admit(t0.Add(time.Minute)); err != first.Err || s.Throttled() {
				t.Errorf("Admit after the loop ended: %v, Throttled %v; want %v, and nothing rejected locally", err, s.Throttled(), first.Err)
			}
			if h.gaveUp != gaveUp || s.Attempts() != attempts {
				t.Errorf("GaveUp %d, attempts %d after the repeats; want %d and %d (nothing new)", h.gaveUp, s.Attempts(), gaveUp, attempts)
			}
			s.Reset(t0.Add(time.Minute))
			if tc.opts == nil {
				if d := s.Decide(t0.Add(time.Minute), rebound.Ready(rebound.FirstAttempt)); d.Verdict != rebound.AttemptNow {
					t.Errorf("after Reset: %+v, want a new run", d)
				}
			}
		})
	}
}

// A zero Schedule (not made by Retrier.NewSchedule) and a nil ctx are bad
// input: an *ArgumentError naming them, never a panic.
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
		d := s.Decide(t0, rebound.Ready(rebound.FirstAttempt))
		if d.Verdict != rebound.Stop {
			t.Errorf("Decide on a zero Schedule: %+v, want Stop", d)
		}
		check("Decide", d.Err)
		check("Decide(Failed)", s.Decide(t0, rebound.Failed(nil)).Err)
		_, err := s.Next(nil, t0)
		check("Next", err)
		_, err = s.Admit(t0)
		check("Admit", err)
		_, err = s.Begin(t0)
		check("Begin", err)
		_, err = s.Refuse(rebound.ErrThrottled, t0)
		check("Refuse", err)
		check("Wait", s.Wait(t.Context(), time.Second, nil))
		s.Decide(t0, rebound.Succeeded())
		s.Decide(t0, rebound.Abandoned())
		s.Decide(t0, rebound.LookedUp(nil))
		s.Reset(t0)
		s.Cancel(t0)
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("Wait(nil ctx): panic %v", p)
			}
		}()
		s := mustRetrier(t, fixed).NewSchedule(t0)
		//lint:ignore SA1012 the test checks that a nil ctx is rejected with an error
		check("Wait(nil ctx)", s.Wait(nil, time.Second, nil))
	}()
}

// A stop Schedule.Wait decides (a refusal under RefuseStop) ends the run
// as Decide's does.
func TestScheduleWaitStopEndsTheRun(t *testing.T) {
	var h hookCount
	b := &fakeBreaker{open: true}
	s := mustRetrier(t, fixed, rebound.WithBreaker(b), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop), h.hooks()).NewSchedule(time.Now())
	if _, err := s.Next(errors.New("down"), time.Now()); err != nil {
		t.Fatal(err)
	}
	err := s.Wait(t.Context(), 0, nil)
	if !errors.Is(err, rebound.ErrBreakerOpen) {
		t.Fatalf("Wait: %v, want the breaker's refusal", err)
	}
	asked, gaveUp := b.asked, h.gaveUp
	if _, again := s.Admit(time.Now()); again != err || b.asked != asked || h.gaveUp != gaveUp {
		t.Errorf("Admit after Wait stopped: %v (breaker asked %d more, GaveUp %d more), want the same stop, nothing asked or reported",
			again, b.asked-asked, h.gaveUp-gaveUp)
	}
}

// A GaveUp hook that panics (its caller recovering) still leaves the run
// ended: the next Ready asks no gate again.
func TestDecideStopHookPanics(t *testing.T) {
	b := &fakeBreaker{open: true}
	s := mustRetrier(t, fixed, rebound.WithBreaker(b), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop),
		rebound.WithObserver(rebound.Hooks{GaveUp: func(rebound.Event) { panic("hook") }})).NewSchedule(t0)
	func() {
		defer func() { _ = recover() }()
		s.Decide(t0, rebound.Ready(rebound.FirstAttempt))
	}()
	if d := s.Decide(t0, rebound.Ready(rebound.RetryAttempt)); d.Verdict != rebound.Stop || b.asked != 1 {
		t.Errorf("Ready after the stop: %+v, breaker asked %d times; want the stop again, asked once", d, b.asked)
	}
}
