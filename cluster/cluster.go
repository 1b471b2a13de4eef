package cluster

import (
	"context"
	"errors"
)

var (
	// ErrNoInvokers is returned (possibly wrapped) by a Directory's List and
	// by a LoadBalance's Select when there is no invoker to call.
	ErrNoInvokers = errors.New("cluster: no invokers available")
	// ErrClosed is returned by the List of a RegistryDirectory after Close.
	// It does not wrap ErrNoInvokers: a closed directory will not recover.
	ErrClosed = errors.New("cluster: directory closed")
	// ErrInvalidArgument is wrapped by the errors returned for a bad
	// argument (for example a nil DialFunc); the message names it.
	ErrInvalidArgument = errors.New("cluster: invalid argument")
)

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
