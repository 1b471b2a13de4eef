package cluster

import "context"

// staticDirectory is a fixed list of invokers.
type staticDirectory struct {
	invokers []Invoker
}

// NewStaticDirectory returns an immutable Directory of the non-nil
// invokers, in order. Its List does not allocate. With no invoker it
// returns ErrNoInvokers.
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
