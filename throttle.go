package rebound

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rebound-go/rebound/internal/nilness"
)

// ErrThrottled is the error of an attempt an AdaptiveThrottle rejected, unsent.
var ErrThrottled = errors.New("rebound: throttled: the backend is rejecting most requests, so this one was rejected locally (adaptive throttling)")

const throttleSlots = 20

// throttleProbes is the number of requests a window must hold before the
// throttle rejects any (docs/engine.md, "Adaptive throttling").
const throttleProbes = throttleSlots

// An AdaptiveThrottle rejects requests locally while the backend rejects them, as in the SRE book.
// It rejects with probability max(0, (requests - k×accepts) / (requests + 1)) once its window holds 20 requests.
// It is safe for concurrent use; time is passed in (docs/policy.md).
type AdaptiveThrottle struct {
	mu     sync.Mutex
	w      window // a: requests, b: accepts
	k      float64
	window time.Duration
	src    rand.Source // nil: math/rand/v2's global source
}

// NewAdaptiveThrottle returns an AdaptiveThrottle.
// The book's values are NewAdaptiveThrottle(2, 2*time.Minute, nil).
// k must be finite and >= 1, window >= 10 ms; a bad value is an *ArgumentError.
// src, if not nil, makes the draws deterministic; give it to no one else.
func NewAdaptiveThrottle(k float64, window time.Duration, src rand.Source) (*AdaptiveThrottle, error) {
	var errs []error
	if math.IsNaN(k) || math.IsInf(k, 0) || k < 1 {
		errs = append(errs, &ArgumentError{Func: "rebound.NewAdaptiveThrottle", Arg: "k",
			Reason: fmt.Sprintf("= %v: must be a finite number >= 1", k)})
	}
	if window < 10*time.Millisecond {
		errs = append(errs, &ArgumentError{Func: "rebound.NewAdaptiveThrottle", Arg: "window",
			Reason: fmt.Sprintf("= %v: must be at least 10ms", window)})
	}
	if src != nil && nilness.Is(src) {
		errs = append(errs, &ArgumentError{Func: "rebound.NewAdaptiveThrottle", Arg: "src",
			Reason: "is a nil pointer: pass nil for the global source"})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &AdaptiveThrottle{w: newWindow(window, throttleSlots), k: k, window: window, src: src}, nil
}

// allow counts a request at now and reports whether to send it.
func (t *AdaptiveThrottle) allow(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := t.drawLocked(now)
	t.w.addA(now)
	return ok
}

// admit is allow for an attempt that another gate (the budget) may still
// refuse: a rejection is counted as a request at once, as by allow, but
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
	if t.src != nil {
		u = float64(t.src.Uint64()>>11) / (1 << 53)
	} else {
		u = rand.Float64()
	}
	return u >= p
}

// accepted counts a request the backend accepted at now.
// Any answer but an overload error is an accept.
func (t *AdaptiveThrottle) accepted(now time.Time) {
	t.mu.Lock()
	t.w.addB(now)
	t.mu.Unlock()
}

// probability returns the formula's rejection probability at now.
func (t *AdaptiveThrottle) probability(now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probLocked(now)
}

func (t *AdaptiveThrottle) probLocked(now time.Time) float64 {
	t.w.advance(now)
	req, acc := t.w.ta, t.w.tb
	return max(0, (req-t.k*acc)/(req+1))
}
