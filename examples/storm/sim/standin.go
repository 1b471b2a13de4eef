package sim

import (
	"math/rand/v2"
	"time"
)

// Stand-ins for rebound.RetryBudget and rebound.AdaptiveThrottle until they
// land on main; they are replaced by the real types, not shipped.

// window counts events in one-second buckets over a sliding window.
type window struct {
	now     func() time.Time
	buckets []float64
	stamp   []int64
}

func newWindow(now func() time.Time, d time.Duration) *window {
	n := max(int(d/time.Second), 1)
	return &window{now: now, buckets: make([]float64, n), stamp: make([]int64, n)}
}

func (w *window) add(v float64) {
	s := w.now().Unix()
	i := int(s % int64(len(w.buckets)))
	if w.stamp[i] != s {
		w.stamp[i], w.buckets[i] = s, 0
	}
	w.buckets[i] += v
}

func (w *window) sum() float64 {
	s := w.now().Unix()
	var t float64
	for i, st := range w.stamp {
		if s-st < int64(len(w.buckets)) {
			t += w.buckets[i]
		}
	}
	return t
}

type standinBudget struct {
	ratio, floor float64
	ttl          time.Duration
	req, ret     *window
}

// newBudget: retries in the last ttl at most ratio × first attempts
// in the last ttl + floor × ttl seconds.
func newBudget(ratio, floor float64, ttl time.Duration) func(Env) Budget {
	return func(e Env) Budget {
		return &standinBudget{ratio: ratio, floor: floor, ttl: ttl, req: newWindow(e.Now, ttl), ret: newWindow(e.Now, ttl)}
	}
}

func (b *standinBudget) Deposit() { b.req.add(1) }
func (b *standinBudget) Withdraw() bool {
	if b.ret.sum()+1 > b.ratio*b.req.sum()+b.floor*b.ttl.Seconds() {
		return false
	}
	b.ret.add(1)
	return true
}

type standinThrottle struct {
	k        float64
	req, acc *window
	rnd      *rand.Rand
}

// newThrottle: the SRE book's rule, reject with probability
// max(0, (requests - k·accepts)/(requests + 1)) over the window.
func newThrottle(k float64, d time.Duration) func(Env) Throttle {
	return func(e Env) Throttle {
		return &standinThrottle{k: k, req: newWindow(e.Now, d), acc: newWindow(e.Now, d),
			rnd: rand.New(rand.NewPCG(e.Seed, e.Seed^0xda3e39cb94b95bdb))}
	}
}

func (t *standinThrottle) Allow() bool {
	r, a := t.req.sum(), t.acc.sum()
	t.req.add(1)
	p := (r - t.k*a) / (r + 1)
	return p <= 0 || t.rnd.Float64() >= p
}

func (t *standinThrottle) Record(accepted bool) {
	if accepted {
		t.acc.add(1)
	}
}
