package sat

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAdd(t *testing.T) {
	for _, c := range []struct{ a, b, want time.Duration }{
		{1, 2, 3},
		{Max, 1, Max},
		{Max, Max, Max},
		{math.MinInt64, -1, math.MinInt64},
		{Max, math.MinInt64, -1},
		{-5, 3, -2},
	} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestMul(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		f    float64
		want time.Duration
	}{
		{10, 1.5, 15},
		{Max, 1.25, Max},
		{Max, 1, Max},
		{-1, 2, 0},
		{10, math.NaN(), 0},
		{10, math.Inf(1), Max},
		{10, -1, 0},
	} {
		if got := Mul(c.d, c.f); got != c.want {
			t.Errorf("Mul(%d, %v) = %d, want %d", c.d, c.f, got, c.want)
		}
	}
}

func TestRoundUp(t *testing.T) {
	for _, c := range []struct{ d, unit, want time.Duration }{
		{1, time.Second, time.Second},
		{time.Second, time.Second, time.Second},
		{Max, time.Second, Max / time.Second * time.Second},
		{0, time.Second, 0},
		{-3, time.Second, 0},
	} {
		if got := RoundUp(c.d, c.unit); got != c.want {
			t.Errorf("RoundUp(%d, %d) = %d, want %d", c.d, c.unit, got, c.want)
		}
	}
}

func TestAddTime(t *testing.T) {
	now := time.Now()
	if got := AddTime(now, Max); !got.After(now) || got.UnixNano() < now.UnixNano() {
		t.Fatalf("AddTime(now, Max) = %v, not after now", got)
	}
	if got := AddTime(now, time.Second); got.Sub(now) != time.Second {
		t.Fatalf("AddTime(now, 1s) - now = %v", got.Sub(now))
	}
}

func FuzzSat(f *testing.F) {
	f.Add(int64(1), int64(2), 0.25, uint64(1))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 1.25, uint64(7))
	f.Add(int64(math.MinInt64), int64(-1), 0.0, uint64(0))
	f.Fuzz(func(t *testing.T, a, b int64, fr float64, seed uint64) {
		da, db := time.Duration(a), time.Duration(b)
		s := Add(da, db)
		if da > 0 && db > 0 && s < max(da, db) {
			t.Fatalf("Add(%d, %d) = %d: wrapped", a, b, s)
		}
		if da < 0 && db < 0 && s > min(da, db) {
			t.Fatalf("Add(%d, %d) = %d: wrapped", a, b, s)
		}
		if m := Mul(da, fr); m < 0 {
			t.Fatalf("Mul(%d, %v) = %d < 0", a, fr, m)
		}
		if db > 0 {
			if r := RoundUp(da, db); r < 0 || (da > 0 && r < da && r != Max/db*db) {
				t.Fatalf("RoundUp(%d, %d) = %d", a, b, r)
			}
		}
		if fr >= 0 && fr <= 1 {
			rng := rand.New(rand.NewPCG(seed, 0))
			j := Jitter(da, fr, rng.Int64N)
			if j < 0 {
				t.Fatalf("Jitter(%d, %v) = %d < 0", a, fr, j)
			}
			if da > 0 && j < da-Mul(da, fr) {
				t.Fatalf("Jitter(%d, %v) = %d below the range", a, fr, j)
			}
		}
	})
}
