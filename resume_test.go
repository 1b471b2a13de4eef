package rebound_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// A resumed schedule draws what the uninterrupted one draws next, and
// stops after MaxAttempts counting the attempts before the interruption.
func TestScheduleResume(t *testing.T) {
	now := time.Unix(0, 0)
	errBoom := errors.New("boom")
	for _, j := range []rebound.Jitter{rebound.FullJitter, rebound.DecorrelatedJitter, rebound.NoJitter} {
		p := rebound.Policy{Jitter: j}
		a, err := rebound.NewRetrier(p, rebound.WithSeed(7), rebound.WithMaxAttempts(6))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := rebound.NewRetrier(p, rebound.WithSeed(7), rebound.WithMaxAttempts(6))
		full, resumed := newLoop(a, now), newLoop(b, now)
		for range 3 {
			if _, stop := full.next(errBoom, now); stop != nil {
				t.Fatal(stop)
			}
		}
		resumed.Resume(3)
		resumed.Resume(1) // no effect
		if resumed.Attempts() != 3 {
			t.Fatalf("%v: Attempts = %d after Resume(3)", j, resumed.Attempts())
		}
		for i := 4; i < 6; i++ {
			d1, s1 := full.next(errBoom, now)
			d2, s2 := resumed.next(errBoom, now)
			if d1 != d2 || s1 != nil || s2 != nil {
				t.Errorf("%v: attempt %d: %v, %v vs resumed %v, %v", j, i, d1, s1, d2, s2)
			}
		}
		if _, stop := resumed.next(errBoom, now); !errors.Is(stop, rebound.ErrExhausted) {
			t.Errorf("%v: after 6 attempts: %v, want ErrExhausted", j, stop)
		}
	}
}

// Resume drew every one of the n delays: a stored call with a huge attempt
// count (a damaged record's bytes: 2^31 attempts) took half a minute to
// load, each. It draws only the last few now, which is where the sequence
// is (the ceiling depends on n alone; a decorrelated delay reaches its
// steady range within them).
func TestScheduleResumeHugeCount(t *testing.T) {
	for _, j := range []rebound.Jitter{rebound.FullJitter, rebound.DecorrelatedJitter, rebound.NoJitter, rebound.EqualJitter} {
		p := rebound.Policy{Jitter: j, Initial: time.Millisecond, Max: time.Minute}
		r, err := rebound.NewRetrier(p, rebound.WithSeed(7))
		if err != nil {
			t.Fatal(err)
		}
		s := newLoop(r, time.Unix(0, 0))
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Resume(1 << 30)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute): // generous: it takes microseconds
			t.Fatalf("%v: Resume(2^30) did not return", j)
		}
		if s.Attempts() != 1<<30 {
			t.Errorf("%v: Attempts = %d, want 2^30", j, s.Attempts())
		}
		if d, _ := s.next(errors.New("boom"), time.Unix(0, 0)); d < p.Initial || d > p.Max {
			t.Errorf("%v: next delay %v out of [Initial, Max]", j, d)
		}
	}
}
