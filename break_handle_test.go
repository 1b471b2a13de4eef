package rebound_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// countingBreaker counts its admissions and their reports, and refuses
// when told to.
type countingBreaker struct {
	allows, dones, canceled int
	refuse                  bool
}

func (b *countingBreaker) Allow() (func(error), error) {
	if b.refuse {
		return nil, errors.New("open")
	}
	b.allows++
	once := false
	return func(err error) {
		if once {
			panic("a breaker admission reported twice")
		}
		once = true
		b.dones++
		if errors.Is(err, context.Canceled) {
			b.canceled++
		}
	}, nil
}

// TestBreakHandleInvariants drives Schedules with every gate through random
// sequences of Admit, Done (also twice and stale), Cancel, Reset, Resume
// and clocks that step back, and checks the handle's documented promises
// after every call: a Decision that is not a stop and has no Delay comes
// only from Admit, with a non-zero Attempt (and a non-zero Attempt only
// then); a wait has Delay > 0; Done never admits; a stale Done changes
// nothing; a breaker admission is reported exactly once, and none is held
// after Cancel, Reset or a stop.
func TestBreakHandleInvariants(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		br := &countingBreaker{}
		lim := rate.NewLimiter(rate.Every(time.Duration(1+rng.IntN(3))*time.Second), 1+rng.IntN(2))
		th, err := rebound.NewAdaptiveThrottle(1.1, time.Minute, rand.NewPCG(seed, 1))
		if err != nil {
			t.Fatal(err)
		}
		bud, err := rebound.NewRetryBudget(0.1, 0.1, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p := rebound.Policy{Initial: time.Millisecond, Max: time.Duration(1+rng.IntN(5)) * time.Second,
			Jitter: rebound.Jitter(rng.IntN(4)), MaxRetryAfter: time.Duration(rng.IntN(3)) * time.Second}
		opts := []rebound.Option{rebound.WithBreaker(br), rebound.WithLimiter(lim), rebound.WithThrottle(th),
			rebound.WithBudget(bud), rebound.WithMaxAttempts(rng.IntN(8)), rebound.WithMaxElapsed(time.Duration(rng.IntN(30)) * time.Second)}
		rules := []rebound.Refusal{rebound.RefuseStop, rebound.RefuseDefer, rebound.RefuseDrop}
		for _, g := range []rebound.Gate{rebound.GateBudget, rebound.GateThrottle, rebound.GateBreaker} {
			opts = append(opts, rebound.WithRefusal(g, rules[rng.IntN(3)]))
		}
		all := rebound.GateLimiter | rebound.GateBudget | rebound.GateThrottle | rebound.GateBreaker
		opts = append(opts, rebound.WithAdmission(rebound.FirstAttempt, rebound.Gate(rng.IntN(16))&all),
			rebound.WithAdmission(rebound.RetryAttempt, rebound.Gate(rng.IntN(16))&all),
			rebound.WithAdmission(rebound.LookupAttempt, rebound.Gate(rng.IntN(16))&(rebound.GateLimiter|rebound.GateThrottle)))
		r, err := rebound.NewRetrier(p, opts...)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		now := t0
		s := r.NewSchedule(now)
		var held []rebound.Attempt // every Attempt admitted so far
		var live rebound.Attempt   // the outstanding one, if any
		for step := range 200 {
			switch rng.IntN(10) {
			case 0:
				now = now.Add(-time.Duration(rng.IntN(3000)) * time.Millisecond) // the clock steps back
			default:
				now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			}
			br.refuse = rng.IntN(6) == 0
			balance := func(what string) {
				t.Helper()
				out := 0
				if live != (rebound.Attempt{}) {
					out = 1
				}
				if n := br.allows - br.dones; n < 0 || n > out { // the breaker may not be in the attempt's gates
					t.Fatalf("seed %d step %d after %s: breaker allows %d, dones %d, outstanding %d",
						seed, step, what, br.allows, br.dones, out)
				}
			}
			switch op := rng.IntN(13); {
			case op < 5:
				a, d := s.Admit(now)
				admitted := !d.Stop && d.Delay == 0
				if admitted != (a != rebound.Attempt{}) {
					t.Fatalf("seed %d step %d: Admit = %+v with Attempt zero %v", seed, step, d, a == rebound.Attempt{})
				}
				if !d.Stop && d.Delay < 0 {
					t.Fatalf("seed %d step %d: Admit wait with Delay %v", seed, step, d.Delay)
				}
				if d.Stop && d.Err == nil {
					t.Fatalf("seed %d step %d: Admit stop with a nil Err", seed, step)
				}
				if admitted {
					live = a
					held = append(held, a)
				} else if d.Stop || d.Reason != nil {
					live = rebound.Attempt{} // a refusal or a stop ends what was outstanding
				}
				balance("Admit")
			case op < 9:
				a := live
				stale := false
				if len(held) > 0 && rng.IntN(4) == 0 {
					a = held[rng.IntN(len(held))]
					stale = a != live
				}
				if a == (rebound.Attempt{}) {
					continue
				}
				var err error
				switch rng.IntN(5) {
				case 0:
				case 1:
					err = rebound.Permanent(errBoom)
				case 2:
					err = rebound.RetryAfter(time.Duration(rng.IntN(5))*time.Second, errBoom)
				default:
					err = errBoom
				}
				before := s.Kind()
				d := a.Done(err, now)
				if !d.Stop && d.Delay <= 0 {
					t.Fatalf("seed %d step %d: Done(%v) = %+v: a wait with no Delay (Done never admits)", seed, step, err, d)
				}
				if stale {
					var ae *rebound.ArgumentError
					if !d.Stop || !errors.As(d.Err, &ae) || s.Kind() != before {
						t.Fatalf("seed %d step %d: stale Done = %+v, kind %d -> %d", seed, step, d, before, s.Kind())
					}
				} else {
					live = rebound.Attempt{}
					if d.Stop && err == nil && d.Err != nil {
						t.Fatalf("seed %d step %d: Done(nil) = %+v", seed, step, d)
					}
				}
				balance("Done")
			case op == 9:
				s.Cancel(now)
				live = rebound.Attempt{}
				balance("Cancel")
			case op == 10:
				s.Reset(now)
				live = rebound.Attempt{}
				balance("Reset")
			case op == 11:
				s.Resume(rng.IntN(10))
				balance("Resume")
			default:
				// A read beside the run (a subscription's confirmation
				// lookup) leaves the run's counts as they are.
				n, k, b := s.Attempts(), s.Kind(), bud.Balance(now)
				admit.Lookup(s, now)
				if s.Attempts() != n || s.Kind() != k || bud.Balance(now) != b {
					t.Fatalf("seed %d step %d: a lookup moved the run: attempts %d -> %d, kind %d -> %d, budget %d -> %d",
						seed, step, n, s.Attempts(), k, s.Kind(), b, bud.Balance(now))
				}
				balance("lookup")
			}
		}
	}
}

// TestBreakResumeHugeCount shows that a run resumed with a huge count (a
// damaged record: Resume is written to take one in no time) overflowed at
// its next failure: Decision.Attempt and the hooks' Event.Attempt went
// negative, and the next Admit took the run for a new one (a first
// attempt). The count saturates instead: it never goes down within a run,
// and the next attempt stays a retry.
func TestBreakResumeHugeCount(t *testing.T) {
	var events []rebound.Event
	r := mustRetrier(t, fixed, rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
		events = append(events, e)
	})))
	s := r.NewSchedule(t0)
	s.Resume(math.MaxInt)
	now := t0
	for i := range 3 {
		a, d := s.Admit(now)
		if d.Stop || d.Delay != 0 {
			t.Fatalf("Admit %d: %+v, want admitted", i, d)
		}
		if d.Attempt != math.MaxInt {
			t.Errorf("Admit %d: Decision.Attempt %d, want %d", i, d.Attempt, math.MaxInt)
		}
		if k := s.Kind(); k != rebound.RetryAttempt {
			t.Errorf("Admit %d: the attempt is kind %d, want a retry", i, k)
		}
		d = a.Done(errBoom, now)
		if d.Stop || d.Attempt != math.MaxInt {
			t.Errorf("Done %d: %+v, want a wait with Attempt %d", i, d, math.MaxInt)
		}
		now = now.Add(d.Delay)
	}
	for _, e := range events {
		if e.Attempt <= 0 {
			t.Errorf("%v event with Attempt %d", e.Kind, e.Attempt)
		}
	}
}
