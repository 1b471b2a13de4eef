package rebound

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrThrottled is the error of an attempt the AdaptiveThrottle rejected
// locally, without sending it. A loop counts such an attempt as a failure
// and backs off; when its policy runs out on one, it returns a *RetryError
// with Reason ErrExhausted and Last ErrThrottled. Retrier.Begin returns it
// as the Reason for a first attempt made outside a loop.
var ErrThrottled = errors.New("rebound: throttled: the backend is rejecting most requests, so this one was rejected locally (adaptive throttling)")

// Defaults of NewAdaptiveThrottle (the Google SRE book's values).
const (
	DefaultThrottleK      = 2.0
	DefaultThrottleWindow = 2 * time.Minute
)

const throttleSlots = 20

// throttleProbes is the number of requests a window must hold before the
// throttle rejects any (docs/engine.md, "Adaptive throttling").
const throttleProbes = throttleSlots

// An AdaptiveThrottle rejects requests locally when the backend has been
// rejecting them: client-side throttling as in the Google SRE book
// ("Handling Overload"). Over a sliding window (default 2 min) it counts
// requests and accepts and rejects a new request with probability
//
//	max(0, (requests - K×accepts) / (requests + 1))
//
// (K default 2: nothing is rejected while half the requests are accepted),
// except that it rejects nothing while its window holds fewer than 20
// requests (sent or rejected): a process with few requests is never
// refused, and one that asks often is throttled as by the formula alone
// (docs/engine.md).
// Give it to loops with WithThrottle; an attempt it rejects is not sent
// and is handled by the throttle's refusal rule (WithRefusal, default
// RefuseDefer: see docs/engine.md).
//
// It is safe for concurrent use, meant to be shared per backend, reads
// time from its callers (a clock stepped back, or a zero time, starts the
// window anew) and allocates nothing. Make it with NewAdaptiveThrottle.
type AdaptiveThrottle struct {
	mu     sync.Mutex
	w      window // a: requests, b: accepts
	k      float64
	window time.Duration
	rnd    *rand.PCG // nil: math/rand/v2's global source
}

// A ThrottleOption configures NewAdaptiveThrottle.
type ThrottleOption interface{ applyThrottle(*throttleConfig) }

type throttleConfig struct {
	k      float64
	window time.Duration
	seed   uint64
	seeded bool
	errs   []error
}

type throttleOptionFunc func(*throttleConfig)

func (f throttleOptionFunc) applyThrottle(c *throttleConfig) { f(c) }

// ThrottleK sets the multiplier K: the client starts rejecting when
// requests exceed K × accepts. Default 2 (the book's value; 1.1 is
// aggressive, larger is lenient). It must be a finite number >= 1.
func ThrottleK(k float64) ThrottleOption {
	return throttleOptionFunc(func(c *throttleConfig) {
		if math.IsNaN(k) || math.IsInf(k, 0) || k < 1 {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.ThrottleK", Arg: "k",
				Reason: fmt.Sprintf("= %v: must be a finite number >= 1", k)})
			return
		}
		c.k = k
	})
}

// ThrottleWindow sets the length of the history (kept in 20 slots).
// Default 2 min. It must be at least 10 ms.
func ThrottleWindow(d time.Duration) ThrottleOption {
	return throttleOptionFunc(func(c *throttleConfig) {
		if d < 10*time.Millisecond {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.ThrottleWindow", Arg: "d",
				Reason: fmt.Sprintf("= %v: must be at least 10ms", d)})
			return
		}
		c.window = d
	})
}

// ThrottleSeed makes the rejection draws deterministic (simulations,
// tests). Default: math/rand/v2's global source.
func ThrottleSeed(seed uint64) ThrottleOption {
	return throttleOptionFunc(func(c *throttleConfig) { c.seed, c.seeded = seed, true })
}

// NewAdaptiveThrottle returns an AdaptiveThrottle with the given options
// (see AdaptiveThrottle for the defaults). A bad option value is an
// *ArgumentError naming the option and its rule.
func NewAdaptiveThrottle(opts ...ThrottleOption) (*AdaptiveThrottle, error) {
	c := throttleConfig{k: DefaultThrottleK, window: DefaultThrottleWindow}
	for _, o := range opts {
		if o != nil {
			o.applyThrottle(&c)
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	t := &AdaptiveThrottle{w: newWindow(c.window, throttleSlots), k: c.k, window: c.window}
	if c.seeded {
		t.rnd = rand.NewPCG(c.seed, c.seed^0x9e3779b97f4a7c15)
	}
	return t, nil
}

// Allow counts a request at now and reports whether to send it (true) or
// reject it locally (false, with the probability above).
func (t *AdaptiveThrottle) Allow(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := t.drawLocked(now)
	t.w.addA(now)
	return ok
}

// admit is Allow for an attempt that another gate (the budget) may still
// refuse: a rejection is counted as a request at once, as by Allow, but
// an admitted attempt only when it is sent (sent), so that an attempt a
// later gate refuses is no request the backend failed to accept.
func (t *AdaptiveThrottle) admit(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.drawLocked(now) {
		return true
	}
	t.w.addA(now)
	return false
}

// sent counts, at now, a request admit let through.
func (t *AdaptiveThrottle) sent(now time.Time) {
	t.mu.Lock()
	t.w.addA(now)
	t.mu.Unlock()
}

// drawLocked reports whether a request at now passes: always while the
// window holds fewer than throttleProbes requests, otherwise false with
// the rejection probability (computed before the request is counted).
func (t *AdaptiveThrottle) drawLocked(now time.Time) bool {
	p := t.probLocked(now)
	if p <= 0 || t.w.ta < throttleProbes {
		return true
	}
	var u float64
	if t.rnd != nil {
		u = float64(t.rnd.Uint64()>>11) / (1 << 53)
	} else {
		u = rand.Float64()
	}
	return u >= p
}

// Accepted counts, at now, a request the backend accepted (it answered,
// even with an error that is not about overload).
func (t *AdaptiveThrottle) Accepted(now time.Time) {
	t.mu.Lock()
	t.w.addB(now)
	t.mu.Unlock()
}

// Probability returns the formula's rejection probability at now. It is
// the probability that Allow rejects a request once the window holds 20
// requests; below that Allow admits every request whatever it says.
func (t *AdaptiveThrottle) Probability(now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probLocked(now)
}

func (t *AdaptiveThrottle) probLocked(now time.Time) float64 {
	t.w.advance(now)
	req, acc := t.w.ta, t.w.tb
	return max(0, (req-t.k*acc)/(req+1))
}

// String describes the throttle's settings.
func (t *AdaptiveThrottle) String() string {
	return fmt.Sprintf("AdaptiveThrottle(K %v, window %v)", t.k, t.window)
}
