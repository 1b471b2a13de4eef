package cluster

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// farFuture is further than any open timeout a test sets, short of the
// ones that never end.
const farFuture = 100 * 365 * 24 * time.Hour

// TestBreakerOpenTimeoutMaxInt64: an open timeout of math.MaxInt64 means
// "until the process restarts": the breaker's Until (in List's and
// Invoke's *BreakerOpenError and in BreakerStatus) is centuries ahead, not
// in 1677 (the end of the timeout overflowed UnixNano), and the target
// stays out.
func TestBreakerOpenTimeoutMaxInt64(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(1)
		ps[0].failing.Store(true)
		d, err := NewBreakerDirectory(static(ps), WithOpenTimeout(math.MaxInt64), WithConsecutiveFailures(1), WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		ivs, _ := d.List(context.Background(), &Invocation{})
		stale := ivs[0]
		callTarget(t, d, "a", 1)
		horizon := time.Now().Add(farFuture)
		_, err = d.List(context.Background(), &Invocation{})
		var boe *BreakerOpenError
		if !errors.As(err, &boe) || !boe.Until.After(horizon) {
			t.Errorf("List after the trip: %v, want a *BreakerOpenError until after %v", err, horizon)
		}
		_, err = stale.Invoke(context.Background(), &Invocation{})
		if !errors.As(err, &boe) || !boe.Until.After(horizon) {
			t.Errorf("Invoke after the trip: %v, want a *BreakerOpenError until after %v", err, horizon)
		}
		if open := d.Open(); len(open) != 1 || !open[0].Until.After(horizon) {
			t.Errorf("Open() = %+v, want a open until after %v", open, horizon)
		}
		time.Sleep(24 * time.Hour)
		if got := listed(t, d); len(got) != 0 {
			t.Errorf("a day later listed %v, want none", got)
		}
	})
}

// TestBreakerWallClockStepBack: the breaker's deadlines are on the
// monotonic clock: a wall clock stepped back an hour (NTP, an operator)
// does not keep a target ejected after its open timeout.
func TestBreakerWallClockStepBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var step atomic.Int64
		defer func(old func() time.Time) { wallNow = old }(wallNow)
		wallNow = func() time.Time { return time.Now().Add(-time.Duration(step.Load())).Round(0) }
		ps := providers(3)
		ps[1].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithOpenTimeout(10*time.Second), WithConsecutiveFailures(1))
		callTarget(t, d, "b", 1)
		if got := strings.Join(listed(t, d), ","); got != "a,c" {
			t.Fatalf("after the trip listed %q, want a,c", got)
		}
		step.Store(int64(time.Hour))
		time.Sleep(10*time.Second + time.Millisecond)
		if got := strings.Join(listed(t, d), ","); got != "a,b,c" {
			t.Errorf("open timeout over, wall clock stepped back 1h: listed %q, want a,b,c (b half-open)", got)
		}
	})
}
