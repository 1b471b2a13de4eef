package rebound_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rebound-go/rebound"
)

// hookCount counts the events a loop reports.
type hookCount struct {
	mu                                    sync.Mutex
	attempted, retried, throttled, gaveUp int
	gaveUpErr                             []error
}

func (h *hookCount) hooks() rebound.Option {
	inc := func(p *int) func(rebound.Event) {
		return func(rebound.Event) { h.mu.Lock(); *p++; h.mu.Unlock() }
	}
	return rebound.WithObserver(rebound.Hooks{
		Attempted: inc(&h.attempted), Retried: inc(&h.retried), Throttled: inc(&h.throttled),
		GaveUp: func(e rebound.Event) {
			h.mu.Lock()
			h.gaveUp++
			h.gaveUpErr = append(h.gaveUpErr, e.Err)
			h.mu.Unlock()
		},
	})
}

// A refusal that ends the loop (RefuseStop) is a local rejection like any
// other: Hooks.Throttled reports it (Delay 0), then GaveUp, once each.
func TestRefuseStopReportsThrottled(t *testing.T) {
	var h hookCount
	b := &fakeBreaker{open: true}
	r := mustRetrier(t, fixed, rebound.WithBreaker(b), rebound.WithRefusal(rebound.GateBreaker, rebound.RefuseStop), h.hooks())
	s := newLoop(r, t0)
	d := s.decide(t0, ready(rebound.FirstAttempt))
	if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrBreakerOpen) {
		t.Fatalf("Decide: %+v, want a stop on the breaker's refusal", d)
	}
	if h.throttled != 1 || h.gaveUp != 1 {
		t.Errorf("Decide: Throttled %d, GaveUp %d; want 1 and 1", h.throttled, h.gaveUp)
	}
	h = hookCount{}
	err := r.Do(context.Background(), func(context.Context) error { t.Fatal("op called through an open breaker"); return nil })
	if !errors.Is(err, rebound.ErrBreakerOpen) || h.throttled != 1 || h.gaveUp != 1 {
		t.Errorf("Do: %v, Throttled %d, GaveUp %d; want the refusal, 1 and 1", err, h.throttled, h.gaveUp)
	}
}
