package rebound

import (
	"math"
	"time"
)

// window counts two quantities over a sliding window of time, in slots:
// the counts of the last `slots` slots (the current one included) add up.
// It is the shared core of RetryBudget and AdaptiveThrottle; the caller
// locks. Time is passed in; a time earlier than the current slot by at
// most one slot counts in the current slot (times from several goroutines
// arrive slightly out of order), so nothing is lost or counted twice.
//
// A time further back than that is a clock step back (wall times such as
// time.Now().UTC() carry no monotonic reading, so an NTP correction moves
// them back): the window starts anew at that time, its counts cleared.
// Counting it in the current slot instead would freeze the window: nothing
// would expire until the clock caught up with the old slot. A time so far
// from the epoch that the difference saturates (a zero time.Time, or one
// ~292 years away) starts a new window too.
type window struct {
	slot   time.Duration // length of one slot
	epoch  time.Time     // the first time seen: slot 0
	begun  bool
	cur    int64 // index of the current slot
	a, b   []float64
	ta, tb float64 // totals over the window
}

func newWindow(length time.Duration, slots int) window {
	slot := max(length/time.Duration(slots), 1)
	return window{slot: slot, a: make([]float64, slots), b: make([]float64, slots)}
}

// advance moves the window to now and returns the current slot's position.
func (w *window) advance(now time.Time) int {
	if !w.begun {
		w.begun, w.epoch = true, now
	}
	d := now.Sub(w.epoch)
	idx := int64(d / w.slot)
	n := int64(len(w.a))
	if d == math.MaxInt64 || d == math.MinInt64 || idx < w.cur-1 {
		w.reset(now)
		return 0
	}
	if idx > w.cur {
		stale := min(idx-w.cur, n)
		for i := int64(1); i <= stale; i++ {
			j := (w.cur + i) % n
			w.ta -= w.a[j]
			w.tb -= w.b[j]
			w.a[j], w.b[j] = 0, 0
		}
		w.cur = idx
		if w.ta < 0.5 { // float drift: the totals are sums of whole counts
			w.ta = max(w.ta, 0)
		}
		if w.tb < 0.5 {
			w.tb = max(w.tb, 0)
		}
	}
	return int(w.cur % n)
}

// reset clears the window and makes now the start of slot 0.
func (w *window) reset(now time.Time) {
	clear(w.a)
	clear(w.b)
	w.ta, w.tb = 0, 0
	w.epoch, w.cur = now, 0
}

func (w *window) addA(now time.Time) {
	i := w.advance(now)
	w.a[i]++
	w.ta++
}

func (w *window) addB(now time.Time) {
	i := w.advance(now)
	w.b[i]++
	w.tb++
}
