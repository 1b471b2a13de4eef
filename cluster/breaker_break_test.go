package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// valueInvoker is an Invoker of a type that cannot be compared (it holds a
// func), passed by value: a Directory may rebuild it for the same target
// (a new connection after a reconnect).
type valueInvoker struct {
	target string
	call   func() (any, error)
}

func (v valueInvoker) Target() string                                   { return v.target }
func (v valueInvoker) Invoke(context.Context, *Invocation) (any, error) { return v.call() }

// TestBreakerReplacedUncomparableInvoker: when the inner directory replaces
// a target's invoker by one of a type that cannot be compared, calls reach
// the new invoker (the breaker is kept), not the one first listed.
func TestBreakerReplacedUncomparableInvoker(t *testing.T) {
	inner := &mutableDir{}
	inner.set(valueInvoker{target: "a", call: func() (any, error) { return "old", nil }})
	d, err := NewBreakerDirectory(inner)
	if err != nil {
		t.Fatal(err)
	}
	call := func() any {
		t.Helper()
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil || len(ivs) != 1 {
			t.Fatalf("List: %v, %v", ivs, err)
		}
		res, err := ivs[0].Invoke(context.Background(), &Invocation{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if got := call(); got != "old" {
		t.Fatalf("first call reached %v, want old", got)
	}
	inner.set(valueInvoker{target: "a", call: func() (any, error) { return "new", nil }})
	if got := call(); got != "new" {
		t.Fatalf("after the inner directory replaced the invoker, the call reached %v, want new", got)
	}
}

// panicEqInvoker is of a comparable type whose values cannot be compared
// at run time (an interface field holding a slice).
type panicEqInvoker struct {
	target string
	state  any
}

func (p panicEqInvoker) Target() string                                   { return p.target }
func (p panicEqInvoker) Invoke(context.Context, *Invocation) (any, error) { return p.state, nil }

// TestBreakerInvokerUncomparableValue: List must not panic on an invoker
// whose == panics (comparable type, uncomparable dynamic field).
func TestBreakerInvokerUncomparableValue(t *testing.T) {
	inner := &mutableDir{}
	inner.set(panicEqInvoker{target: "a", state: []int{1}})
	d, err := NewBreakerDirectory(inner)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil || len(ivs) != 1 {
			t.Fatalf("List: %v, %v", ivs, err)
		}
		inner.set(panicEqInvoker{target: "a", state: []int{2}})
	}
}

// TestBreakerShareKeepsFirstOpenedOut: with more breakers open than the
// share lets out, the target whose breaker opened first stays out, also
// while it is half-open with its probe in flight: the probe is its one
// call, and the traffic beyond the share goes to the target that opened
// later (before, the half-open one was sorted by when it became half-open
// and was called anyway, a burst beside its probe).
func TestBreakerShareKeepsFirstOpenedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(3)
		ps[0].failing.Store(true)
		ps[1].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithOpenTimeout(time.Second), WithConsecutiveFailures(1))
		callTarget(t, d, "a", 1) // a opens at 0
		time.Sleep(500 * time.Millisecond)
		callTarget(t, d, "b", 1) // b opens at 0.5 s: beyond the share (1 of 3), called anyway
		if got := strings.Join(listed(t, d), ","); got != "b,c" {
			t.Fatalf("listed %q, want b,c (a out, b beyond the share)", got)
		}
		time.Sleep(700 * time.Millisecond) // a half-open at 1 s
		ivs, _ := d.List(context.Background(), &Invocation{})
		if got := strings.Join(targets(ivs), ","); got != "a,c" {
			t.Fatalf("a half-open: listed %q, want a,c (a's probe, b out)", got)
		}
		ps[0].failing.Store(false)
		ps[0].block = make(chan struct{})
		release := sync.OnceFunc(func() { close(ps[0].block) })
		defer release()
		done := make(chan error, 1)
		go func() { _, err := ivs[0].Invoke(context.Background(), &Invocation{}); done <- err }()
		synctest.Wait() // a's probe is in flight
		before := ps[0].calls.Load()
		if got := strings.Join(listed(t, d), ","); got != "b,c" {
			t.Fatalf("during a's probe listed %q, want b,c (a opened first: it stays out)", got)
		}
		for _, e := range callTarget(t, d, "a", 3) {
			if e == nil {
				t.Errorf("a call reached a beside its probe")
			}
		}
		if n := ps[0].calls.Load() - before; n != 0 {
			t.Errorf("a reached %d times during its probe, want 0 (one call, not a burst)", n)
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("probe: %v", err)
		}
	})
}

// TestBreakerProbeRecheckNotInPast: while every target is half-open with
// its probe in flight, List's *BreakerOpenError says when to look again;
// that time stays in the future however long the probe takes (the cached
// answer kept the first Until, so a failback retry waiting for it found it
// past and requeued every millisecond until the probe ended).
func TestBreakerProbeRecheckNotInPast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(1)
		ps[0].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithOpenTimeout(time.Second), WithConsecutiveFailures(1), WithMaxEjected(1))
		callTarget(t, d, "a", 1)
		time.Sleep(2 * time.Second) // half-open
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil || len(ivs) != 1 {
			t.Fatalf("half-open: %v, %v", ivs, err)
		}
		ps[0].block = make(chan struct{})
		release := sync.OnceFunc(func() { close(ps[0].block) })
		defer release()
		done := make(chan error, 1)
		go func() { _, err := ivs[0].Invoke(context.Background(), &Invocation{}); done <- err }()
		synctest.Wait() // the probe is in flight
		for i := range 5 {
			_, err := d.List(context.Background(), &Invocation{})
			var boe *BreakerOpenError
			if !errors.As(err, &boe) {
				t.Fatalf("List during the probe: %v, want a *BreakerOpenError", err)
			}
			if !boe.Until.After(time.Now()) {
				t.Fatalf("after %d s of probe, List says look again at %v, %v ago", i, boe.Until, time.Since(boe.Until))
			}
			time.Sleep(time.Second)
		}
		release()
		<-done
	})
}
