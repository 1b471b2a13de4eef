package dueheap

import (
	"math"
	"time"
)

// Wait is the waiting half of a due-time scheduler: the due time the one
// scheduler goroutine's timer is set for, and the wake-up that an earlier
// due time sends it. Both schedulers of the tree (subscriber's and
// failback's) are a Heap, a Wait and one goroutine looping on
// Armed / Sleep; they differ only in what they do with the elements that
// come due. Its fields are guarded by the owner's lock, but Sleep, which
// the scheduler goroutine calls with no lock held.
type Wait struct {
	at   int64 // the due time the timer is set for; MaxInt64: none
	wake chan struct{}
}

// NewWait returns a Wait with no timer set.
func NewWait() Wait { return Wait{at: math.MaxInt64, wake: make(chan struct{}, 1)} }

// Pushed records that an element due at due was added or moved; it reports
// whether the scheduler goroutine must be woken (due is before its timer):
// then call Wake, after releasing the lock if you like. The caller holds
// the owner's lock.
func (w *Wait) Pushed(due int64) bool {
	if due >= w.at {
		return false
	}
	w.at = due
	return true
}

// Wake wakes the scheduler goroutine (once: a wake-up already pending is
// enough). It needs no lock.
func (w *Wait) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Armed sets the timer for the earliest element of h, measured from now in
// the heap's time unit (nanoseconds), and returns how long to sleep: -1
// when h is empty (sleep until a Wake). The caller holds the owner's lock,
// after popping the elements due.
func Armed[E Elem](w *Wait, h Heap[E], now int64) time.Duration {
	if len(h) == 0 {
		w.at = math.MaxInt64
		return -1
	}
	w.at, _ = h[0].Key()
	return time.Duration(w.at - now)
}

// Disarm records that no timer is set (the goroutine will look again at
// once). The caller holds the owner's lock.
func (w *Wait) Disarm() { w.at = math.MaxInt64 }

// Sleep waits d on timer (d < 0: until a Wake), or until a Wake or done.
// It reports false when done is closed. timer must be stopped or expired
// and drained (a timer made by time.NewTimer with a huge duration, and
// only ever used here, is: Go 1.23 timers need no draining).
func (w *Wait) Sleep(timer *time.Timer, d time.Duration, done <-chan struct{}) bool {
	if d < 0 {
		select {
		case <-w.wake:
			return true
		case <-done:
			return false
		}
	}
	timer.Reset(d)
	select {
	case <-timer.C:
	case <-w.wake:
	case <-done:
		return false
	}
	return true
}
