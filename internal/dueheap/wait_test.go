package dueheap_test

import (
	"container/heap"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/internal/dueheap"
)

// TestWait: a scheduler goroutine on a Wait sleeps until the earliest due
// time, is woken by an earlier one only (a later push sends no wake-up),
// sleeps without a timer on an empty heap, and ends when done closes.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := dueheap.NewWait()
		var h dueheap.Heap[*item]
		if d := dueheap.Armed(&w, h, 0); d != -1 {
			t.Fatalf("empty heap: sleep %v, want -1 (until a wake-up)", d)
		}
		if !w.Pushed(int64(5 * time.Second)) {
			t.Fatal("a due time on an idle scheduler did not ask for a wake-up")
		}
		heap.Push(&h, &item{due: int64(5 * time.Second)})
		if d := dueheap.Armed(&w, h, int64(time.Second)); d != 4*time.Second {
			t.Fatalf("armed from 1 s for 5 s: %v", d)
		}
		if w.Pushed(int64(6 * time.Second)) {
			t.Fatal("a due time after the timer asked for a wake-up")
		}
		if !w.Pushed(int64(2 * time.Second)) {
			t.Fatal("a due time before the timer did not ask for a wake-up")
		}
		timer := time.NewTimer(time.Duration(math.MaxInt64))
		defer timer.Stop()
		done := make(chan struct{})
		woke := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			w.Sleep(timer, time.Hour, done)
			woke <- time.Since(start)
		}()
		time.Sleep(time.Second)
		w.Wake()
		if d := <-woke; d != time.Second {
			t.Fatalf("woken after %v, want 1 s", d)
		}
		w.Wake()
		w.Wake() // one wake-up pending is enough: a second never blocks
		ended := make(chan bool)
		go func() { ended <- w.Sleep(timer, -1, done) }()
		if !<-ended {
			t.Fatal("Sleep with a wake-up pending reported done")
		}
		go func() { ended <- w.Sleep(timer, -1, done) }()
		synctest.Wait()
		close(done)
		if <-ended {
			t.Fatal("Sleep reported true after done closed")
		}
	})
}
