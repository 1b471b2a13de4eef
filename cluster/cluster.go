package cluster

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rebound-go/rebound/internal/closed"
)

var (
	// ErrNoInvokers is returned (possibly wrapped) by a Directory's List and
	// by a LoadBalance's Select when there is no invoker to call.
	ErrNoInvokers = errors.New("cluster: no invokers available")
	// ErrClosed is returned by the List of a RegistryDirectory after Close.
	// It matches rebound.ErrClosed. It does not wrap ErrNoInvokers: a
	// closed directory will not recover.
	ErrClosed = closed.New("cluster: directory closed")
)

// PanicError is the error a recovered panic becomes: a DialFunc that
// panics in RegistryDirectory.Update, or (in package failback) an Invoker,
// Directory, LoadBalance or hook that panics on a background goroutine.
// errors.Is and errors.As see through it to Value when Value is an error.
type PanicError struct {
	// Op names what panicked, for example "cluster.DialFunc" or
	// "Invoker.Invoke".
	Op string
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine (runtime/debug.Stack).
	Stack []byte
}

// NewPanicError returns a *PanicError for the value v recovered from op,
// with the current goroutine's stack. Call it in the deferred function that
// recovered v.
func NewPanicError(op string, v any) *PanicError {
	return &PanicError{Op: op, Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.Op, e.Value) }

// Unwrap returns Value if it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Invocation describes one call: the method, its arguments and string
// attachments (headers). Invokers and load balancers must treat it as read
// only: a failback invoker keeps it and sends it again on every retry.
type Invocation struct {
	Method      string
	Args        []any
	Attachments map[string]string
}

// Invoker calls one provider. Implementations must be safe for concurrent
// use. An Invoker that holds resources should also implement io.Closer: a
// RegistryDirectory closes the invokers of instances that disappear.
type Invoker interface {
	// Target identifies the provider, for example "10.0.0.7:20880". Two
	// invokers with the same Target are the same provider for exclusion
	// and logging. It must be cheap and must not change.
	Target() string
	// Invoke performs the call. It must return when ctx is done.
	Invoke(ctx context.Context, inv *Invocation) (any, error)
}

// Directory lists the invokers that can currently serve inv.
//
// List must be safe for concurrent use. It returns an error wrapping
// ErrNoInvokers, never an empty slice with a nil error, when there is
// nothing to call. Callers must treat the returned slice as read only:
// implementations may return their internal slice.
type Directory interface {
	List(ctx context.Context, inv *Invocation) ([]Invoker, error)
}

// LoadBalance picks the invoker for one attempt of a call.
//
// Select must be safe for concurrent use. It must not return a nil Invoker
// with a nil error; with no invoker to pick it returns an error wrapping
// ErrNoInvokers. exclude holds the invokers that already failed for this
// call: an implementation should skip every invoker whose Target equals the
// Target of one of them while another invoker is left, and pick among all
// of them otherwise (a provider that failed once is better than none).
// Select must not modify either slice.
type LoadBalance interface {
	Select(invokers []Invoker, inv *Invocation, exclude []Invoker) (Invoker, error)
}
