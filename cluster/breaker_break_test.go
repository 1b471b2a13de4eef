package cluster

import (
	"context"
	"testing"
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
