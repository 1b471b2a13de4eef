package dueheap_test

import (
	"container/heap"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/internal/dueheap"
)

// loop is a scheduler built like the tree's two: a Heap and a Wait under
// one lock, one goroutine on Armed / Sleep. between, if set, is called
// between Armed and Sleep with no lock held (where a push races with the
// goroutine going to sleep).
type loop struct {
	mu      sync.Mutex
	h       dueheap.Heap[*item]
	w       dueheap.Wait
	epoch   time.Time
	fired   map[*item]time.Duration
	between func()
	done    chan struct{}
	exited  chan struct{}
}

func newLoop() *loop {
	l := &loop{w: dueheap.NewWait(), epoch: time.Now(), fired: map[*item]time.Duration{},
		done: make(chan struct{}), exited: make(chan struct{})}
	go l.run()
	return l
}

func (l *loop) now() int64 { return int64(time.Since(l.epoch)) }

func (l *loop) run() {
	defer close(l.exited)
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	for {
		l.mu.Lock()
		now := l.now()
		for len(l.h) > 0 && l.h[0].due <= now {
			l.fired[heap.Pop(&l.h).(*item)] = time.Duration(now)
		}
		d := dueheap.Armed(&l.w, l.h, now)
		between := l.between
		l.mu.Unlock()
		if between != nil {
			between()
		}
		if !l.w.Sleep(timer, d, l.done) {
			return
		}
	}
}

func (l *loop) push(it *item) {
	l.mu.Lock()
	heap.Push(&l.h, it)
	wake := l.w.Pushed(it.due)
	l.mu.Unlock()
	if wake {
		l.w.Wake()
	}
}

func (l *loop) firedAt(it *item) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.fired[it]
	return at, ok
}

// TestWaitNoLostWakeUp: an earlier due time pushed while the goroutine is
// between Armed and Sleep fires on time; a timer left set for a removed
// element neither fires it nor delays a later one; closing done while the
// goroutine sleeps ends it.
func TestWaitNoLostWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop()
		late := &item{due: int64(time.Hour), seq: 1}
		early := &item{due: int64(time.Second), seq: 2}
		var once sync.Once
		l.mu.Lock()
		l.between = func() { once.Do(func() { l.push(early) }) }
		l.mu.Unlock()
		l.push(late) // the goroutine arms for 1 h, then early is pushed before it sleeps
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if at, ok := l.firedAt(early); !ok || at != time.Second {
			t.Fatalf("early (due 1 s, pushed between Armed and Sleep): fired %v at %v; want at 1 s", ok, at)
		}

		// The timer is set for head (due 3 s); head is removed and a
		// later one (5 s) pushed: it asks no wake-up, yet fires at 5 s.
		head := &item{due: int64(3 * time.Second), seq: 3}
		l.push(head)
		synctest.Wait()
		l.mu.Lock()
		heap.Remove(&l.h, int(head.index))
		l.mu.Unlock()
		next := &item{due: int64(5 * time.Second), seq: 4}
		l.push(next)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if _, ok := l.firedAt(head); ok {
			t.Fatal("a removed element fired")
		}
		if at, ok := l.firedAt(next); !ok || at != 5*time.Second {
			t.Fatalf("next (due 5 s, after a removed head at 3 s): fired %v at %v; want at 5 s", ok, at)
		}

		synctest.Wait() // asleep until late (1 h)
		close(l.done)
		<-l.exited
		if _, ok := l.firedAt(late); ok {
			t.Fatal("late fired before its time")
		}
	})
}
