package rebound_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rebound-go/rebound"
)

func TestZeroPolicyDefaults(t *testing.T) {
	got := rebound.Policy{}.Normalized()
	want := rebound.Policy{Initial: time.Second, Multiplier: 2, Max: 30 * time.Second, Jitter: rebound.FullJitter, MaxRetryAfter: 5 * time.Minute}
	if got != want {
		t.Fatalf("Policy{}.Normalized() = %+v, want %+v", got, want)
	}
	if err := (rebound.Policy{}).Validate(); err != nil {
		t.Fatalf("zero policy invalid: %v", err)
	}
}

func TestNormalizedOnlyMaxOrInitial(t *testing.T) {
	if got := (rebound.Policy{Max: 200 * time.Millisecond}).Normalized(); got.Initial != 200*time.Millisecond {
		t.Errorf("Max below default Initial: Initial = %v, want 200ms", got.Initial)
	}
	if got := (rebound.Policy{Initial: 2 * time.Minute}).Normalized(); got.Max != 2*time.Minute {
		t.Errorf("Initial above default Max: Max = %v, want 2m", got.Max)
	}
}

func TestValidateNamesFieldAndRule(t *testing.T) {
	cases := []struct {
		name   string
		p      rebound.Policy
		substr string
	}{
		{"negative initial", rebound.Policy{Initial: -1}, "Initial = -1ns: must not be negative"},
		{"tiny initial", rebound.Policy{Initial: time.Nanosecond}, "Initial = 1ns: must be 0 (the default) or at least 500µs"},
		{"multiplier below 1", rebound.Policy{Multiplier: 0.5}, "Multiplier = 0.5: must be 0 (the default, 2) or at least 1"},
		{"multiplier NaN", rebound.Policy{Multiplier: math.NaN()}, "Multiplier = NaN: must be a finite number"},
		{"multiplier Inf", rebound.Policy{Multiplier: math.Inf(1)}, "Multiplier = +Inf: must be a finite number"},
		{"negative max", rebound.Policy{Max: -time.Second}, "Max = -1s: must not be negative"},
		{"max below initial", rebound.Policy{Initial: 2 * time.Second, Max: time.Second}, "Max = 1s: must not be less than Initial (2s)"},
		{"bad jitter", rebound.Policy{Jitter: 42}, "Jitter = 42: must be FullJitter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("Validate() = %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.substr)
			}
		})
	}
	// Several bad fields are all reported.
	err := rebound.Policy{Initial: -1, Multiplier: 0.5}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Initial") || !strings.Contains(err.Error(), "Multiplier") {
		t.Fatalf("Validate() = %v, want both fields named", err)
	}
}

// A negative limit is an *ArgumentError naming the option and its rule.
func TestLimitsRejectNegative(t *testing.T) {
	for _, tc := range []struct {
		opt    rebound.Option
		fn     string
		substr string
	}{
		{rebound.WithMaxAttempts(-1), "rebound.WithMaxAttempts", "must not be negative"},
		{rebound.WithMaxElapsed(-time.Second), "rebound.WithMaxElapsed", "must not be negative"},
	} {
		_, err := rebound.NewRetrier(rebound.Policy{}, tc.opt)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != tc.fn || !strings.Contains(ae.Reason, tc.substr) {
			t.Errorf("NewRetrier with %s = %v, want an ArgumentError naming it and its rule", tc.fn, err)
		}
		called := false
		err = rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error { called = true; return nil }, tc.opt)
		if !errors.As(err, &ae) || ae.Func != tc.fn || called {
			t.Errorf("Retry with %s = %v (op called %v), want an ArgumentError naming it, op not called", tc.fn, err, called)
		}
	}
}

func TestValidateAcceptsGoodPolicies(t *testing.T) {
	for _, p := range []rebound.Policy{
		{},
		{Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: rebound.NoJitter},
		{Initial: 100 * time.Millisecond, Multiplier: 1.6, Max: 2 * time.Minute, Jitter: rebound.DecorrelatedJitter, MaxRetryAfter: time.Hour},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

func TestCeilingNeverOverflows(t *testing.T) {
	p := rebound.Policy{Initial: time.Second, Multiplier: 2, Max: 30 * time.Second}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for n, w := range want {
		if got := p.Ceiling(n); got != w*time.Second {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w*time.Second)
		}
	}
	huge := rebound.Policy{Initial: time.Hour, Multiplier: 1e300, Max: math.MaxInt64}
	for _, n := range []int{-5, 0, 1, 2, 62, 63, 64, 1000, 1e6, math.MaxInt} {
		for _, pol := range []rebound.Policy{p, huge} {
			got := pol.Ceiling(n)
			if got <= 0 || got > pol.Normalized().Max {
				t.Fatalf("Ceiling(%d) of %+v = %v: out of (0, Max]", n, pol, got)
			}
		}
	}
	if got := huge.Ceiling(1e6); got != math.MaxInt64 {
		t.Fatalf("huge Ceiling(1e6) = %v, want Max", got)
	}
}

// drawMany returns n delays from one BackOff, failing on Stop.
func drawMany(t *testing.T, p rebound.Policy, n int, seed uint64) []time.Duration {
	t.Helper()
	b := p.NewBackOff(rebound.WithSeed(seed))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.NextBackOff()
		if out[i] == backoff.Stop {
			t.Fatalf("draw %d: Stop from an unlimited policy", i)
		}
	}
	return out
}

func TestJitterRanges(t *testing.T) {
	base := rebound.Policy{Initial: 100 * time.Millisecond, Multiplier: 2, Max: 3 * time.Second}
	norm := base.Normalized()
	const draws = 2000
	for _, j := range []rebound.Jitter{rebound.FullJitter, rebound.EqualJitter, rebound.NoJitter} {
		t.Run(j.String(), func(t *testing.T) {
			p := base
			p.Jitter = j
			// For each position n, collect many draws from fresh BackOffs.
			for n := 0; n < 8; n++ {
				c := norm.Ceiling(n)
				lo := map[rebound.Jitter]time.Duration{rebound.FullJitter: rebound.MinDelay, rebound.EqualJitter: c / 2, rebound.NoJitter: c}[j]
				var minSeen, maxSeen time.Duration = math.MaxInt64, 0
				for s := 0; s < draws/8; s++ {
					d := drawMany(t, p, n+1, uint64(s))[n]
					if d < lo || d > c {
						t.Fatalf("n=%d: delay %v outside [%v, %v]", n, d, lo, c)
					}
					minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
				}
				if j != rebound.NoJitter && maxSeen-minSeen < (c-lo)/2 {
					t.Errorf("n=%d: draws span only [%v, %v] of [%v, %v]: not jittered", n, minSeen, maxSeen, lo, c)
				}
			}
		})
	}
	t.Run("decorrelated", func(t *testing.T) {
		p := base
		p.Jitter = rebound.DecorrelatedJitter
		for s := 0; s < 200; s++ {
			ds := drawMany(t, p, 30, uint64(s))
			prev := p.Initial
			for i, d := range ds {
				hi := min(p.Max, 3*prev)
				if d < p.Initial || d > hi {
					t.Fatalf("seed %d draw %d: %v outside [%v, %v]", s, i, d, p.Initial, hi)
				}
				prev = d
			}
		}
	})
}

func TestCapReachedAndHeld(t *testing.T) {
	p := rebound.Policy{Initial: 10 * time.Millisecond, Multiplier: 3, Max: time.Second, Jitter: rebound.NoJitter}
	ds := drawMany(t, p, 1000, 1)
	for i, d := range ds[5:] {
		if d != time.Second {
			t.Fatalf("draw %d = %v, want the cap 1s", i+5, d)
		}
	}
}

func TestNoOverflowAfterMillionDraws(t *testing.T) {
	for _, j := range []rebound.Jitter{rebound.FullJitter, rebound.EqualJitter, rebound.DecorrelatedJitter, rebound.NoJitter} {
		p := rebound.Policy{Initial: time.Second, Multiplier: 10, Max: time.Duration(math.MaxInt64), Jitter: j}
		b := p.NewBackOff(rebound.WithSeed(7))
		for i := 0; i < 1_000_000; i++ {
			if d := b.NextBackOff(); d < rebound.MinDelay {
				t.Fatalf("%v draw %d = %v: below MinDelay", j, i, d)
			}
		}
	}
}

func TestMaxAttemptsStops(t *testing.T) {
	b := rebound.Policy{}.NewBackOff(rebound.WithMaxAttempts(4))
	for i := 1; i <= 3; i++ {
		if d := b.NextBackOff(); d == backoff.Stop {
			t.Fatalf("NextBackOff after failure %d = Stop, want a delay", i)
		}
	}
	if d := b.NextBackOff(); d != backoff.Stop {
		t.Fatalf("NextBackOff after failure 4 = %v, want Stop", d)
	}
	b.Reset()
	if d := b.NextBackOff(); d == backoff.Stop {
		t.Fatal("Reset did not restart the attempt count")
	}
	if d := (rebound.Policy{}).NewBackOff(rebound.WithMaxAttempts(1)).NextBackOff(); d != backoff.Stop {
		t.Fatalf("MaxAttempts 1: NextBackOff = %v, want Stop (no retry)", d)
	}
}

func TestSeedIsDeterministic(t *testing.T) {
	a := drawMany(t, rebound.Policy{}, 50, 99)
	b := drawMany(t, rebound.Policy{}, 50, 99)
	c := drawMany(t, rebound.Policy{}, 50, 100)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, draw %d: %v != %v", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical sequences")
	}
}

func TestInvalidPolicyNeverSpins(t *testing.T) {
	bad := rebound.Policy{Initial: -time.Hour, Multiplier: math.NaN(), Max: -1, Jitter: 99}
	if got := bad.Normalized(); got != (rebound.Policy{}).Normalized() {
		t.Fatalf("Normalized(bad) = %+v, want the defaults", got)
	}
	b := bad.NewBackOff(rebound.WithMaxAttempts(-3), rebound.WithMaxElapsed(-1)) // bad limits: none
	for i := 0; i < 100; i++ {
		if d := b.NextBackOff(); d < rebound.MinDelay || d > 30*time.Second {
			t.Fatalf("draw %d = %v", i, d)
		}
	}
}

func FuzzNewBackOff(f *testing.F) {
	f.Add(int64(time.Second), 2.0, int64(30*time.Second), 0, 0, uint64(1), 10)
	f.Add(int64(-1), math.NaN(), int64(0), 3, -1, uint64(2), 1000)
	f.Add(int64(1), math.Inf(1), int64(math.MaxInt64), 2, 5, uint64(3), 64)
	f.Add(int64(math.MaxInt64), 1e308, int64(1), 1, 0, uint64(4), 100)
	f.Fuzz(func(t *testing.T, initial int64, mult float64, maxD int64, jitter, attempts int, seed uint64, n int) {
		p := rebound.Policy{
			Initial: time.Duration(initial), Multiplier: mult, Max: time.Duration(maxD),
			Jitter: rebound.Jitter(jitter),
		}
		limit := max(attempts, 0) // a negative limit means none
		norm := p.Normalized()
		if err := norm.Validate(); err != nil {
			t.Fatalf("Normalized() = %+v is invalid: %v", norm, err)
		}
		b := p.NewBackOff(rebound.WithSeed(seed), rebound.WithMaxAttempts(attempts))
		n = min(max(n, 0), 2000)
		for i := 0; i < n; i++ {
			d := b.NextBackOff()
			if d == backoff.Stop {
				if limit == 0 || i+1 < limit {
					t.Fatalf("draw %d: unexpected Stop (MaxAttempts %d)", i, limit)
				}
				return
			}
			if d < rebound.MinDelay || d > norm.Max {
				t.Fatalf("draw %d = %v: outside [MinDelay, %v]", i, d, norm.Max)
			}
		}
	})
}

func BenchmarkNextBackOff(b *testing.B) {
	for _, j := range []rebound.Jitter{rebound.FullJitter, rebound.EqualJitter, rebound.DecorrelatedJitter, rebound.NoJitter} {
		b.Run(j.String(), func(b *testing.B) {
			bo := rebound.Policy{Jitter: j}.NewBackOff(rebound.WithSeed(1))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%64 == 0 {
					bo.Reset()
				}
				if bo.NextBackOff() <= 0 {
					b.Fatal("non-positive delay")
				}
			}
		})
	}
	b.Run("cenkalti-exponential", func(b *testing.B) {
		bo := backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%64 == 0 {
				bo.Reset()
			}
			if bo.NextBackOff() <= 0 {
				b.Fatal("non-positive delay")
			}
		}
	})
}

// Once the previous delay reaches Max, decorrelated jitter draws from
// [Initial, 3*Max] and caps at Max: about two draws in three (60s of the 89s
// range, with the defaults) are then exactly Max.
func TestDecorrelatedCapsAtMax(t *testing.T) {
	p := rebound.Policy{Jitter: rebound.DecorrelatedJitter} // 1s .. 30s
	maxD := p.Normalized().Max
	ds := drawMany(t, p, 50000, 3)
	afterMax, atMax := 0, 0
	for i := 1; i < len(ds); i++ {
		if ds[i-1] == maxD {
			afterMax++
			if ds[i] == maxD {
				atMax++
			}
		}
	}
	if share := float64(atMax) / float64(afterMax); afterMax < 1000 || share < 0.62 || share > 0.72 {
		t.Fatalf("after a delay at Max, %d of %d draws at Max (%.0f%%), want about 67%%", atMax, afterMax, share*100)
	}
}

func BenchmarkNewBackOff(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if (rebound.Policy{}).NewBackOff() == nil {
			b.Fatal("nil BackOff")
		}
	}
}
