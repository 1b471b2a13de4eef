package rebound_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Many Schedules share one rate.Limiter, in virtual time, each failing,
// retrying, looking up, abandoning and restarting at random: the attempts
// and lookups admitted never exceed the limiter's rate (burst included) in
// any window.
func TestSharedLimiterAcrossSchedules(t *testing.T) {
	const (
		loops = 40
		every = 100 * time.Millisecond // 10 tokens a second
		burst = 3
	)
	lim := rate.NewLimiter(rate.Every(every), burst)
	r := mustRetrier(t, rebound.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Jitter: rebound.FullJitter},
		rebound.WithLimiter(lim), rebound.WithSeed(7),
		rebound.WithAdmission(rebound.FirstAttempt, rebound.GateLimiter))
	rnd := rand.New(rand.NewPCG(1, 2))
	// Each loop has two lanes, its run and its lookups beside it, each
	// asking again exactly when its wait is over (its token's time).
	type lane struct {
		s    *loop
		due  time.Time
		kind rebound.AttemptKind
	}
	var lanes []*lane
	for range loops {
		s := newLoop(r, t0)
		lanes = append(lanes,
			&lane{s: s, due: t0.Add(time.Duration(rnd.IntN(1000)) * time.Millisecond)},
			&lane{s: s, due: t0.Add(time.Duration(rnd.IntN(1000)) * time.Millisecond), kind: rebound.LookupAttempt})
	}
	var grants []time.Time
	for step := 0; step < 20000; step++ {
		l := lanes[0] // the lane due first runs next: time only moves forward
		for _, o := range lanes[1:] {
			if o.due.Before(l.due) {
				l = o
			}
		}
		now := l.due
		if l.kind != rebound.LookupAttempt {
			switch rnd.IntN(20) {
			case 0:
				l.s.decide(now, abandoned())
			case 1:
				l.s.Reset(now)
				l.kind = rebound.FirstAttempt
			}
		}
		d := l.s.decide(now, ready(l.kind))
		switch d.Verdict() {
		case rebound.AttemptNow:
			grants = append(grants, now)
			switch {
			case l.kind == rebound.LookupAttempt:
				l.s.decide(now, lookedUp(nil))
				l.due = now.Add(time.Duration(rnd.IntN(500)) * time.Millisecond)
			case rnd.IntN(4) == 0:
				l.s.decide(now, succeeded())
				l.kind = rebound.FirstAttempt
				l.due = now.Add(time.Duration(rnd.IntN(200)) * time.Millisecond)
			default:
				f := l.s.decide(now, failed(errors.New("down")))
				if f.Verdict() != rebound.WaitFor {
					t.Fatalf("failure: %+v", f)
				}
				l.kind = rebound.RetryAttempt
				l.due = now.Add(f.Delay)
			}
		case rebound.WaitFor:
			l.due = now.Add(d.Delay)
		default:
			t.Fatalf("Ready: %+v", d)
		}
	}
	if len(grants) < 1000 {
		t.Fatalf("only %d grants: the test proves nothing", len(grants))
	}
	// In any window of length w, at most burst + w/every grants.
	const w = time.Second
	j := 0
	for i := range grants {
		for grants[i].Sub(grants[j]) >= w {
			j++
		}
		if n := i - j + 1; n > burst+int(w/every) {
			t.Fatalf("%d grants in the %v ending at %v, want at most %d", n, w, grants[i].Sub(t0), burst+int(w/every))
		}
	}
	t.Logf("%d grants over %v", len(grants), grants[len(grants)-1].Sub(t0))
}

// Admit and Done cost no allocation without a limiter, with the budget,
// the throttle and hooks; nor does Retrier.Do whose first attempt
// succeeds.
func TestDecideAndDoDoNotAllocate(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second)
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(rebound.Event) {}
	r := mustRetrier(t, fixed, rebound.WithBudget(b), rebound.WithThrottle(th),
		rebound.WithObserver(rebound.Hooks{Attempted: ev, Retried: ev, Recovered: ev, GaveUp: ev, Throttled: ev}))
	s := r.NewSchedule(t0)
	fail := errors.New("down")
	if n := testing.AllocsPerRun(100, func() {
		a, _ := s.AdmitKind(t0, rebound.FirstAttempt)
		a.Done(fail, t0)
		a, _ = s.AdmitKind(t0, rebound.RetryAttempt)
		a.Done(nil, t0)
		s.AdmitKind(t0, rebound.FirstAttempt)
		s.Cancel(t0)
	}); n != 0 {
		t.Errorf("Admit and Done: %v allocations per loop, want 0", n)
	}
	ctx := t.Context()
	op := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { _ = r.Do(ctx, op) }); n != 0 {
		t.Errorf("Retrier.Do, first attempt succeeds: %v allocations, want 0", n)
	}
}
