package cluster

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// TestBreakerInvokerGoexit: an invoker that ends its goroutine with
// runtime.Goexit (t.FailNow in a test double) must not be turned into a
// panic by Invoke, and its call counts as ended.
func TestBreakerInvokerGoexit(t *testing.T) {
	inner := &mutableDir{}
	inner.set(valueInvoker{target: "a", call: func() (any, error) { runtime.Goexit(); return nil, nil }})
	d, err := NewBreakerDirectory(inner, WithConsecutiveFailures(1))
	if err != nil {
		t.Fatal(err)
	}
	ivs, err := d.List(context.Background(), &Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	panicked := make(chan any, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked <- recover() }()
		_, _ = ivs[0].Invoke(context.Background(), &Invocation{})
	}()
	<-done
	if p := <-panicked; p != nil {
		var pe *runtime.PanicNilError
		if e, ok := p.(error); ok && errors.As(e, &pe) {
			t.Fatalf("Invoke turned the invoker's runtime.Goexit into a panic: %v", p)
		}
		t.Fatalf("Invoke panicked: %v", p)
	}
}
