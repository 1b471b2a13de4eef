package rebound_test

import (
	"math"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// A wall clock that steps back more than a window (time.Now().UTC() has no
// monotonic reading, so an NTP correction moves it back) starts a new
// window: the budget keeps granting its floor per window instead of
// freezing until the clock catches up with the old slot.
func TestBudgetClockStepBack(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second) // floor: 100 retries per 10 s
	ahead := t0.Add(time.Hour)
	for b.TryWithdraw(ahead) {
	}
	// The clock steps back an hour; 3 windows of 10 retries each.
	refused := 0
	for w := 0; w < 3; w++ {
		now := t0.Add(time.Duration(w) * 10 * time.Second)
		for i := 0; i < 10; i++ {
			if !b.TryWithdraw(now.Add(time.Duration(i) * 100 * time.Millisecond)) {
				refused++
			}
		}
	}
	if refused != 0 {
		t.Fatalf("%d of 30 retries refused after the clock stepped back an hour, want 0", refused)
	}
	if got := b.Balance(t0.Add(time.Minute)); got != 100 {
		t.Fatalf("Balance a minute after the step = %d, want 100 (the floor)", got)
	}
}

// Times out of order by less than a slot still count in the current slot:
// the step-back rule does not reset the window for them.
func TestBudgetSlightlyOutOfOrderCounts(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second)
	for i := 0; i < 100; i++ {
		if !b.TryWithdraw(t0.Add(5 * time.Second)) {
			t.Fatalf("retry %d refused", i)
		}
	}
	if b.TryWithdraw(t0.Add(5*time.Second - 500*time.Millisecond)) {
		t.Fatal("a retry half a slot out of order reset the window: 101 retries granted in one window")
	}
}

// A zero time.Time as the first timestamp does not freeze the budget.
func TestBudgetZeroFirstTime(t *testing.T) {
	b := mustBudget(t, 0.2, 10, 10*time.Second)
	b.Deposit(time.Time{})
	for b.TryWithdraw(t0) {
	}
	if !b.TryWithdraw(t0.Add(10 * time.Second)) {
		t.Fatal("retry refused a window after the budget was exhausted (first time was the zero time.Time)")
	}
}

// After the clock steps back, a healthy backend is not throttled: a loop
// that sends when Allow says so, and records each accept, runs freely.
func TestThrottleClockStepBack(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	ahead := t0.Add(time.Hour)
	for i := 0; i < 100; i++ { // the backend rejects everything
		th.Allow(ahead)
	}
	if p := th.Probability(ahead); p < 0.9 {
		t.Fatalf("Probability after 100 rejections = %.2f, want >= 0.9", p)
	}
	// The clock steps back an hour; 10 healthy minutes, one request a second.
	sent := 0
	for i := 0; i < 600; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		if th.Allow(now) {
			sent++
			th.Accepted(now)
		}
	}
	end := t0.Add(10 * time.Minute)
	if p := th.Probability(end); p != 0 || sent != 600 {
		t.Fatalf("after 10 healthy minutes: Probability %.2f, %d of 600 requests sent; want 0 and 600", p, sent)
	}
}

// A zero time.Time as the first timestamp does not freeze the throttle.
func TestThrottleZeroFirstTime(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	th.Allow(time.Time{})
	for i := 0; i < 100; i++ {
		th.Allow(t0)
	}
	if p := th.Probability(t0.Add(3 * time.Minute)); p != 0 {
		t.Fatalf("Probability 3 min (beyond the 2 min window) after the rejections = %.2f, want 0", p)
	}
}

// Balance agrees with TryWithdraw when the floor does not fit an int: it
// saturates at math.MaxInt instead of reporting 0 while granting everything.
func TestBudgetBalanceSaturates(t *testing.T) {
	for _, n := range []float64{math.MaxFloat64, 1e300} {
		b := mustBudget(t, 0.2, n, 10*time.Second)
		if !b.TryWithdraw(t0) {
			t.Fatalf("MinPerSecond %g: retry refused", n)
		}
		if got := b.Balance(t0); got != math.MaxInt {
			t.Fatalf("MinPerSecond %g: Balance = %d, want math.MaxInt (every retry is granted)", n, got)
		}
	}
}
