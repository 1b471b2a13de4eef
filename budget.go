package rebound

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrBudgetExhausted is the refusal of a retry by a RetryBudget.
var ErrBudgetExhausted = errors.New("rebound: retry budget exhausted: too many retries for the requests sent recently")

// budgetSlots is the number of slots of a budget's sliding window.
const budgetSlots = 10

// A RetryBudget caps the retries of the loops sharing it (see WithBudget).
// Over the last window it allows ratio × first attempts + minPerSecond × window retries.
// It is safe for concurrent use; time is passed in (docs/policy.md).
// The zero value is not usable: use NewRetryBudget.
type RetryBudget struct {
	mu     sync.Mutex
	w      window // a: deposits (first attempts), b: withdrawals (retries)
	ratio  float64
	floor  float64 // minPerSecond × window
	window time.Duration
}

// NewRetryBudget returns a RetryBudget.
// Finagle's defaults are NewRetryBudget(0.2, 10, 10*time.Second).
// ratio must be in [0, 1000], minPerSecond finite and >= 0, window >= 10 ms.
// A bad value is an *ArgumentError.
func NewRetryBudget(ratio, minPerSecond float64, window time.Duration) (*RetryBudget, error) {
	var errs []error
	bad := func(arg string, v any, rule string) {
		errs = append(errs, &ArgumentError{Func: "rebound.NewRetryBudget", Arg: arg,
			Reason: fmt.Sprintf("= %v: %s", v, rule)})
	}
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1000 {
		bad("ratio", ratio, "must be a number in [0, 1000]")
	}
	if math.IsNaN(minPerSecond) || math.IsInf(minPerSecond, 0) || minPerSecond < 0 {
		bad("minPerSecond", minPerSecond, "must be a finite number >= 0")
	}
	if window < 10*time.Millisecond {
		bad("window", window, "must be at least 10ms")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &RetryBudget{
		w:      newWindow(window, budgetSlots),
		ratio:  ratio,
		floor:  minPerSecond * window.Seconds(),
		window: window,
	}, nil
}

// deposit counts a first attempt made at now.
func (b *RetryBudget) deposit(now time.Time) {
	b.mu.Lock()
	b.w.addA(now)
	b.mu.Unlock()
}

// tryWithdraw reports whether the budget allows a retry at now.
// It counts the retry if so.
func (b *RetryBudget) tryWithdraw(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.w.advance(now)
	if b.w.tb+1 > b.ratio*b.w.ta+b.floor+1e-9 {
		return false
	}
	b.w.addB(now)
	return true
}

// balance returns how many retries the budget would allow at now,
// saturated at math.MaxInt (an infinite floor grants every retry).
func (b *RetryBudget) balance(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.w.advance(now)
	v := math.Floor(b.ratio*b.w.ta + b.floor - b.w.tb + 1e-9)
	if v >= math.MaxInt { // float64(math.MaxInt) is 2^63; +Inf compares above too
		return math.MaxInt
	}
	return max(0, int(v))
}
