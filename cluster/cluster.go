package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrNoInvokers is returned, possibly wrapped, when there is no invoker
	// to call.
	ErrNoInvokers = errors.New("cluster: no invokers available")
	// errClosed is a closed RegistryDirectory's error. It matches
	// rebound.ErrClosed, not ErrNoInvokers: it will not recover.
	errClosed = closed.New("cluster: directory closed")
)

// PanicError is what a recovered panic of user code becomes. errors.As
// sees through it to Value when Value is an error.
type PanicError struct {
	// Op names what panicked, such as "cluster.Invoker.Invoke".
	Op string
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// newPanicError returns a *PanicError for the value v recovered from op,
// with the current goroutine's stack.
func newPanicError(op string, v any) *PanicError {
	return &PanicError{Op: op, Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.Op, e.Value) }

// Unwrap returns Value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Invocation is one call: method, arguments and string attachments.
// Treat it as read only: failback sends it again on each retry.
type Invocation struct {
	Method      string
	Args        []any
	Attachments map[string]string
}

// Invoker calls one provider; it must be safe for concurrent use. One that
// holds resources should be an io.Closer: a RegistryDirectory closes it.
type Invoker interface {
	// Target identifies the provider, such as "10.0.0.7:20880". It must be
	// cheap and must not change.
	Target() string
	// Invoke performs the call and returns when ctx is done.
	Invoke(ctx context.Context, inv *Invocation) (any, error)
}

// Directory lists the invokers that can serve inv. List must be safe for
// concurrent use. With nothing to call, its error wraps ErrNoInvokers.
// Callers must not modify the slice.
type Directory interface {
	List(ctx context.Context, inv *Invocation) ([]Invoker, error)
}

// LoadBalance picks the invoker of one attempt. Select must be safe for
// concurrent use and modify neither slice. It skips the targets in exclude
// while another is left. With nothing to pick, its error wraps
// ErrNoInvokers.
type LoadBalance interface {
	Select(invokers []Invoker, inv *Invocation, exclude []Invoker) (Invoker, error)
}
