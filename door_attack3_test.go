package rebound_test

// Attacks on the engine's one door (Schedule.Admit -> Attempt.Done), written
// by a reviewer from `go doc` and docs/engine.md. Every test here runs in
// passed-in times (no wall clock) and fails on a defect of the library.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

var (
	bk3T0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bk3Err = errors.New("bk3: unreachable")
	bk3Off = errors.New("bk3: breaker open")
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
		return nil, bk3Off
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

func (b *bk3Breaker) setRefuse(v bool) { b.mu.Lock(); b.refuse = v; b.mu.Unlock() }

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

// A Permanent mark whose error is nil (a *backoff.PermanentError built by
// hand, which IsPermanent reports as permanent) is retried: Done returns
// WaitFor with a Delay of 0 -- a busy-spin (DESIGN.md: delay arithmetic
// "never yields a negative or zero delay") -- instead of stopping the loop.
func TestPermanentNilErrIsRetried(t *testing.T) {
	r := bk3Retrier(t, bk3Policy)
	s := r.NewSchedule(bk3T0)
	a, _ := s.Admit(bk3T0, rebound.FirstAttempt)
	perm := &backoff.PermanentError{}
	if !rebound.IsPermanent(perm) {
		t.Fatal("IsPermanent = false")
	}
	if d := a.Done(perm, bk3T0); d.Verdict != rebound.Stop && !(d.Verdict == rebound.WaitFor && d.Delay >= rebound.MinDelay) {
		t.Fatalf("Done(a Permanent error) = %+v; want Stop", d)
	}
}
