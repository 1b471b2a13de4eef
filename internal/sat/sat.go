// Package sat is duration arithmetic that saturates instead of overflowing.
//
// Every duration option of every package goes through it where a value is
// added, multiplied, rounded or jittered, so a huge setting (math.MaxInt64)
// means "as long as a Duration can say" and never wraps to a negative or
// tiny delay. The results are clamped to [math.MinInt64, math.MaxInt64];
// callers that need a positive delay clamp the low end themselves.
package sat

import (
	"math"
	"time"
)

// Max is the longest Duration.
const Max = time.Duration(math.MaxInt64)

// Add returns a+b, saturated at Max and at the most negative Duration.
func Add(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return Max
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// Mul returns d*f for f >= 0, saturated at Max; a NaN factor gives 0.
// A negative d or f is taken as 0.
func Mul(d time.Duration, f float64) time.Duration {
	if d <= 0 || !(f > 0) {
		return 0
	}
	v := float64(d) * f
	if v >= float64(math.MaxInt64) { // float64(MaxInt64) is 2^63; +Inf compares above too
		return Max
	}
	return time.Duration(v)
}

// RoundUp returns d rounded up to a whole multiple of unit (unit > 0),
// saturated at the largest multiple of unit that fits. A d <= 0 gives 0.
func RoundUp(d, unit time.Duration) time.Duration {
	if d <= 0 || unit <= 0 {
		return max(d, 0)
	}
	q := d / unit
	if d%unit != 0 {
		if q == Max/unit {
			return q * unit
		}
		q++
	}
	return q * unit
}

// AddTime returns t+d, saturated at the latest UnixNano a time can hold, so
// a deadline far away stays in the future instead of wrapping into the past.
// The result keeps t's monotonic reading where t has one.
func AddTime(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return t.Add(d)
	}
	if room := time.Duration(math.MaxInt64 - t.UnixNano()); t.UnixNano() >= 0 && d > room {
		d = room
	}
	return t.Add(d)
}

// Jitter returns a duration drawn by draw from [d-d*f, d+d*f] (0 <= f <= 1),
// saturated at Max and never below 0; draw(n) returns a value in [0, n).
func Jitter(d time.Duration, f float64, draw func(n int64) int64) time.Duration {
	if d <= 0 {
		return 0
	}
	spread := Mul(d, f)
	if spread <= 0 {
		return d
	}
	lo := max(d-spread, 0)
	width := Add(spread, spread) // of [lo, d+spread]; saturates
	if d-lo < spread {
		width = Add(d-lo, spread)
	}
	if width == Max {
		width-- // draw takes n > 0 and returns < n
	}
	return Add(lo, time.Duration(draw(int64(width)+1)))
}
