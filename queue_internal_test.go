package rebound

import (
	"testing"
	"time"
)

// A Queue that never empties (a steady stream into a slow observer, the
// case it exists for) keeps a backing array bounded by its capacity: the
// events already delivered are not kept in front of the ones waiting.
func TestQueueBackingArrayStaysBounded(t *testing.T) {
	const capacity = 8
	release := make(chan struct{})
	got := make(chan struct{}, 1)
	done := make(chan struct{})
	q, err := NewQueue(ObserverFunc(func(Event) {
		select {
		case got <- struct{}{}:
		case <-done:
			return
		}
		select {
		case <-release:
		case <-done:
		}
	}), capacity, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	defer close(done)
	q.Observe(Event{Kind: EventAttempt})
	<-got // the goroutine holds the first event; the queue is empty
	for range capacity {
		q.Observe(Event{Kind: EventAttempt})
	}
	// Each round: the observer takes one event (the queue never empties),
	// one more is queued.
	for i := range 10 * capacity {
		release <- struct{}{}
		select {
		case <-got:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the observer was not called again", i)
		}
		q.Observe(Event{Kind: EventAttempt, Attempt: i})
	}
	q.mu.Lock()
	n, c := len(q.buf)-q.head, cap(q.buf)
	q.mu.Unlock()
	if n != capacity {
		t.Fatalf("%d events queued, want %d", n, capacity)
	}
	if c > 2*capacity+1 {
		t.Fatalf("backing array of %d events for a queue of capacity %d: delivered events are kept", c, capacity)
	}
	if d := q.Dropped(); d != 0 {
		t.Fatalf("Dropped = %d, want 0", d)
	}
}
