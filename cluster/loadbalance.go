package cluster

import (
	"math/rand/v2"
	"sync/atomic"
)

// Random returns a LoadBalance that picks at random, without allocating.
// It is package failback's default.
func Random() LoadBalance { return &random{} }

// random's Select has a pointer receiver: with a value receiver, every
// call through the interface would go through a compiler-made wrapper,
// one more call. A pointer to a zero-size value allocates nothing.
type random struct{}

func (*random) Select(invokers []Invoker, _ *Invocation, exclude []Invoker) (Invoker, error) {
	return pick(invokers, exclude, rand.Uint64())
}

// RoundRobin returns a LoadBalance that picks the invokers in turn. Its
// one shared counter scales worse than Random on many cores.
func RoundRobin() LoadBalance { return &roundRobin{} }

// roundRobin's turn is one counter shared by all calls: with a changing
// list or with exclusions the rotation is fair on average, not strict.
type roundRobin struct {
	next atomic.Uint64
}

func (r *roundRobin) Select(invokers []Invoker, _ *Invocation, exclude []Invoker) (Invoker, error) {
	return pick(invokers, exclude, r.next.Add(1)-1)
}

// pick returns the (r mod k)-th of the k eligible invokers: non-nil and not
// excluded, or, when every non-nil invoker is excluded, non-nil.
func pick(invokers, exclude []Invoker, r uint64) (Invoker, error) {
	n := len(invokers)
	if n == 0 {
		return nil, ErrNoInvokers
	}
	if len(exclude) == 0 {
		if iv := invokers[r%uint64(n)]; iv != nil {
			return iv, nil
		}
	}
	useExclude := len(exclude) > 0
	k := countEligible(invokers, exclude, useExclude)
	if k == 0 && useExclude {
		useExclude = false
		k = countEligible(invokers, exclude, false)
	}
	if k == 0 {
		return nil, ErrNoInvokers
	}
	want := int(r % uint64(k))
	for _, iv := range invokers {
		if eligible(iv, exclude, useExclude) {
			if want == 0 {
				return iv, nil
			}
			want--
		}
	}
	return nil, ErrNoInvokers // unreachable: k eligible invokers exist
}

func countEligible(invokers, exclude []Invoker, useExclude bool) int {
	k := 0
	for _, iv := range invokers {
		if eligible(iv, exclude, useExclude) {
			k++
		}
	}
	return k
}

func eligible(iv Invoker, exclude []Invoker, useExclude bool) bool {
	if iv == nil {
		return false
	}
	if !useExclude {
		return true
	}
	t := iv.Target()
	for _, e := range exclude {
		if e != nil && e.Target() == t {
			return false
		}
	}
	return true
}
