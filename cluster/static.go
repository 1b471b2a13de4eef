package cluster

import "context"

// staticDirectory is a fixed list of invokers.
type staticDirectory struct {
	invokers []Invoker
}

// NewStaticDirectory returns a Directory that always lists the given
// invokers, in order; nil invokers are left out. It copies the arguments,
// so the caller may reuse its slice.
//
// List ignores ctx and inv, does not allocate, and returns the directory's
// internal slice: callers must not modify it. With no invoker, List returns
// ErrNoInvokers. The directory is immutable and safe for concurrent use.
func NewStaticDirectory(invokers ...Invoker) Directory {
	d := &staticDirectory{}
	for _, iv := range invokers {
		if iv != nil {
			d.invokers = append(d.invokers, iv)
		}
	}
	return d
}

func (d *staticDirectory) List(context.Context, *Invocation) ([]Invoker, error) {
	if len(d.invokers) == 0 {
		return nil, ErrNoInvokers
	}
	return d.invokers, nil
}
