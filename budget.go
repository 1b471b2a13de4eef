package rebound

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrBudgetExhausted is the Reason of the *RetryError a loop returns when
// its RetryBudget refused a retry.
var ErrBudgetExhausted = errors.New("rebound: retry budget exhausted: too many retries for the requests sent recently")

// Defaults of NewRetryBudget (Finagle's RetryBudget defaults).
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetWindow       = 10 * time.Second
	DefaultBudgetMinPerSecond = 10.0
)

// budgetSlots is the number of slots of a budget's sliding window.
const budgetSlots = 10

// A RetryBudget bounds the retries of any number of loops that share it to
// a fraction of their first attempts, like Finagle's RetryBudget and
// Envoy's retry_budget: over a sliding Window (default 10 s) it allows
//
//	Ratio × first attempts + MinPerSecond × Window
//
// retries (defaults 0.2 and 10/s: 20% of the requests plus 100 retries per
// 10 s). The floor lets a client that sends few requests still retry;
// above it, during a full outage, retries stay at Ratio of the traffic
// instead of multiplying it.
//
// Give it to loops with WithBudget: Retry and Retrier.Do count each call's
// first attempt (Deposit) and ask for each retry (TryWithdraw); a refused
// retry ends the loop with a *RetryError whose Reason is
// ErrBudgetExhausted. Schedule.Admit asks the same way; loops that make
// first attempts outside a Schedule count them with Retrier.Begin.
//
// A RetryBudget is safe for concurrent use and meant to be shared (one per
// downstream service, per process). Time is passed in, so it runs in
// virtual time too. A time more than one slot (Window/10) before the
// latest one seen is a clock stepped back (wall times such as
// time.Now().UTC() carry no monotonic reading): the window starts anew
// there, its counts cleared, instead of freezing until the clock catches
// up; so does a zero time.Time. Its methods allocate nothing. The zero value is not
// usable: use NewRetryBudget.
type RetryBudget struct {
	mu     sync.Mutex
	w      window // a: deposits (first attempts), b: withdrawals (retries)
	ratio  float64
	floor  float64 // MinPerSecond × Window
	window time.Duration
	minPS  float64
}

// A BudgetOption configures NewRetryBudget.
type BudgetOption interface{ applyBudget(*budgetConfig) }

type budgetConfig struct {
	ratio, minPS float64
	window       time.Duration
	errs         []error
}

type budgetOptionFunc func(*budgetConfig)

func (f budgetOptionFunc) applyBudget(c *budgetConfig) { f(c) }

// BudgetRatio sets the retries allowed per first attempt: 0.2 allows one
// retry per five requests (on top of the floor). Default 0.2. It must be a
// finite number in [0, 1000]; 0 leaves only the floor.
func BudgetRatio(r float64) BudgetOption {
	return budgetOptionFunc(func(c *budgetConfig) {
		if math.IsNaN(r) || r < 0 || r > 1000 {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.BudgetRatio", Arg: "r",
				Reason: fmt.Sprintf("= %v: must be a number in [0, 1000]", r)})
			return
		}
		c.ratio = r
	})
}

// BudgetWindow sets how long a first attempt and a retry count: the
// length of the sliding window (kept in 10 slots). Default 10 s. It must be
// at least 10 ms.
func BudgetWindow(d time.Duration) BudgetOption {
	return budgetOptionFunc(func(c *budgetConfig) {
		if d < 10*time.Millisecond {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.BudgetWindow", Arg: "d",
				Reason: fmt.Sprintf("= %v: must be at least 10ms", d)})
			return
		}
		c.window = d
	})
}

// BudgetMinPerSecond sets the floor: retries per second allowed whatever
// the traffic. Default 10. It must be a finite number >= 0; 0 means no
// floor (then a client must send requests before it may retry).
func BudgetMinPerSecond(n float64) BudgetOption {
	return budgetOptionFunc(func(c *budgetConfig) {
		if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
			c.errs = append(c.errs, &ArgumentError{Func: "rebound.BudgetMinPerSecond", Arg: "n",
				Reason: fmt.Sprintf("= %v: must be a finite number >= 0", n)})
			return
		}
		c.minPS = n
	})
}

// NewRetryBudget returns a RetryBudget with the given options (see
// RetryBudget for the defaults). A bad option value is an *ArgumentError
// naming the option and its rule.
func NewRetryBudget(opts ...BudgetOption) (*RetryBudget, error) {
	c := budgetConfig{ratio: DefaultBudgetRatio, minPS: DefaultBudgetMinPerSecond, window: DefaultBudgetWindow}
	for _, o := range opts {
		if o != nil {
			o.applyBudget(&c)
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return &RetryBudget{
		w:      newWindow(c.window, budgetSlots),
		ratio:  c.ratio,
		floor:  c.minPS * c.window.Seconds(),
		window: c.window,
		minPS:  c.minPS,
	}, nil
}

// Deposit counts a first attempt (a request) made at now.
func (b *RetryBudget) Deposit(now time.Time) {
	b.mu.Lock()
	b.w.addA(now)
	b.mu.Unlock()
}

// TryWithdraw asks for one retry at now: it reports whether the budget
// allows it, and counts it if so.
func (b *RetryBudget) TryWithdraw(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.w.advance(now)
	if b.w.tb+1 > b.ratio*b.w.ta+b.floor+1e-9 {
		return false
	}
	b.w.addB(now)
	return true
}

// Balance returns how many retries the budget would allow at now. It
// saturates at math.MaxInt: a budget whose allowance does not fit an int
// (BudgetMinPerSecond(math.MaxFloat64), an infinite floor) reports
// math.MaxInt, and grants every retry.
func (b *RetryBudget) Balance(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.w.advance(now)
	v := math.Floor(b.ratio*b.w.ta + b.floor - b.w.tb + 1e-9)
	if v >= math.MaxInt { // float64(math.MaxInt) is 2^63; +Inf compares above too
		return math.MaxInt
	}
	return max(0, int(v))
}

// String describes the budget's settings.
func (b *RetryBudget) String() string {
	return fmt.Sprintf("RetryBudget(ratio %v, min %v/s, window %v)", b.ratio, b.minPS, b.window)
}
