package rebound_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
)

var sweepValues = []time.Duration{0, 1, -time.Second, math.MaxInt64}

// sweepRetry runs Retry with p and opts against an op that always fails
// with err(attempt) for one minute of fake time, and fails the test on a
// busy loop (two attempts less than MinDelay apart) or a Retry that
// outlives its ctx.
func sweepRetry(t *testing.T, name string, p rebound.Policy, fail func() error, opts ...rebound.Option) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		var at []time.Time
		err := rebound.Retry(ctx, p, func(context.Context) error {
			at = append(at, time.Now())
			return fail()
		}, opts...)
		if err == nil || len(at) == 0 {
			t.Fatalf("%s: Retry = %v after %d attempts; want a failure after at least one", name, err, len(at))
		}
		if el := time.Since(start); el > time.Minute {
			t.Fatalf("%s: Retry returned after %v, beyond its ctx", name, el)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < rebound.MinDelay {
				t.Fatalf("%s: attempts %d and %d only %v apart (a busy loop)", name, i, i+1, gap)
			}
		}
	})
}

// Every duration setting of package rebound (the Policy's fields,
// WithMaxElapsed, BudgetWindow, ThrottleWindow, RetryAfter) with 0, 1 ns, a negative value
// and math.MaxInt64: refused with an error naming the setting and the
// rule, or accepted, and then a Retry that keeps failing for a minute
// waits at least MinDelay between attempts and ends with its ctx.
func TestDurationSettingsSweep(t *testing.T) {
	transient := func() error { return rebound.Transient(errors.New("down")) }
	fields := []struct {
		name string
		set  func(*rebound.Policy, time.Duration)
		ok   func(time.Duration) bool
	}{
		{"Initial", func(p *rebound.Policy, d time.Duration) { p.Initial = d }, func(d time.Duration) bool { return d == 0 || d >= rebound.MinDelay }},
		{"Max", func(p *rebound.Policy, d time.Duration) { p.Max = d }, func(d time.Duration) bool { return d == 0 || d >= rebound.MinDelay }},
		{"MaxRetryAfter", func(p *rebound.Policy, d time.Duration) { p.MaxRetryAfter = d }, func(d time.Duration) bool { return d >= 0 }},
	}
	for _, f := range fields {
		for _, d := range sweepValues {
			t.Run("Policy."+f.name+"/"+d.String(), func(t *testing.T) {
				var p rebound.Policy
				f.set(&p, d)
				err := p.Validate()
				if !f.ok(d) {
					if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), f.name+" = ") || !strings.Contains(err.Error(), "must") {
						t.Fatalf("Policy{%s: %d}.Validate() = %v; want an error naming %s and its rule", f.name, d, err, f.name)
					}
					return
				}
				if err != nil {
					t.Fatalf("Policy{%s: %d}.Validate() = %v; want it accepted", f.name, d, err)
				}
				sweepRetry(t, "Policy."+f.name, p, transient)
				sweepRetry(t, "Policy."+f.name+" with Retry-After", p, func() error { return rebound.RetryAfter(time.Hour, transient()) })
			})
		}
	}
	for _, d := range sweepValues {
		t.Run("MaxElapsed/"+d.String(), func(t *testing.T) {
			_, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithMaxElapsed(d))
			if sweepRefused(t, "rebound.WithMaxElapsed", d, d >= 0, err) {
				return
			}
			sweepRetry(t, "MaxElapsed", rebound.Policy{}, transient, rebound.WithMaxElapsed(d))
			sweepRetry(t, "MaxElapsed with Retry-After", rebound.Policy{}, func() error { return rebound.RetryAfter(time.Hour, transient()) }, rebound.WithMaxElapsed(d))
		})
		t.Run("RetryAfter/"+d.String(), func(t *testing.T) {
			sweepRetry(t, "RetryAfter", rebound.Policy{}, func() error { return rebound.RetryAfter(d, transient()) })
		})
		t.Run("BudgetWindow/"+d.String(), func(t *testing.T) {
			b, err := rebound.NewRetryBudget(0.2, 10, d)
			if sweepRefused(t, "rebound.NewRetryBudget", d, d >= 10*time.Millisecond, err) {
				return
			}
			sweepRetry(t, "BudgetWindow", rebound.Policy{}, transient, rebound.WithBudget(b))
		})
		t.Run("ThrottleWindow/"+d.String(), func(t *testing.T) {
			th, err := rebound.NewAdaptiveThrottle(2, d, nil)
			if sweepRefused(t, "rebound.NewAdaptiveThrottle", d, d >= 10*time.Millisecond, err) {
				return
			}
			sweepRetry(t, "ThrottleWindow", rebound.Policy{}, transient, rebound.WithThrottle(th))
		})
	}
}

// sweepRefused checks the constructor's verdict on d and reports whether
// d was refused.
func sweepRefused(t *testing.T, fn string, d time.Duration, accepted bool, err error) bool {
	t.Helper()
	var ae *rebound.ArgumentError
	switch {
	case accepted && err != nil:
		t.Fatalf("%s(%d) = %v; want it accepted", fn, d, err)
	case !accepted && (!errors.As(err, &ae) || ae.Func != fn || !strings.Contains(ae.Reason, "must")):
		t.Fatalf("%s(%d) = %v; want an ArgumentError of %s stating the rule", fn, d, err, fn)
	}
	return !accepted
}
