package regstate

import (
	"container/heap"
	"math"
	"sync"
	"time"

	"github.com/rebound-go/rebound/internal/dueheap"
)

// Sched runs the due times of many registrations on one heap and one
// timer: a registration waiting for a check, a grace or a retry costs a
// heap entry, no goroutine and no timer of its own. Its goroutine runs
// while a Timer is armed and ends when none is. The zero value is not
// usable: use NewSched. It is safe for concurrent use.
type Sched struct {
	epoch   time.Time // with its monotonic reading: due times follow the monotonic clock
	mu      sync.Mutex
	heap    dueheap.Heap[*Timer]
	seq     uint64
	wait    dueheap.Wait
	running bool // a goroutine runs the heap
}

// NewSched returns a Sched with nothing armed (and no goroutine).
func NewSched() *Sched { return &Sched{epoch: time.Now(), wait: dueheap.NewWait()} }

// A Timer is one due time of a Sched. When it comes due, the Sched's
// goroutine calls its function with the generation it was armed with; the
// function must not block (it hands the work to another goroutine). Gen
// tells a stale call (the Timer was reset or stopped since) from a live
// one.
type Timer struct {
	s     *Sched
	f     func(gen uint32)
	due   int64
	seq   uint64
	index int32
	gen   uint32
}

// NewTimer returns a stopped Timer that calls f.
func (s *Sched) NewTimer(f func(gen uint32)) *Timer {
	t := new(Timer)
	s.InitTimer(t, f)
	return t
}

// InitTimer makes the zero t a stopped Timer of s that calls f, as
// NewTimer does, for a Timer held by value.
func (s *Sched) InitTimer(t *Timer, f func(gen uint32)) { *t = Timer{s: s, f: f, index: -1} }

// Key implements dueheap.Elem.
func (t *Timer) Key() (int64, uint64) { return t.due, t.seq }

// SetIndex implements dueheap.Elem.
func (t *Timer) SetIndex(i int32) { t.index = i }

// Reset arms t to fire after d (at least 1 ns), replacing any earlier
// due time; it returns t's new generation.
func (t *Timer) Reset(d time.Duration) uint32 {
	s := t.s
	s.mu.Lock()
	now := int64(time.Since(s.epoch))
	due := int64(math.MaxInt64)
	if d < time.Duration(math.MaxInt64-now) {
		due = now + int64(max(d, time.Nanosecond))
	}
	t.gen++
	t.due = due
	s.seq++
	t.seq = s.seq
	if t.index >= 0 {
		heap.Fix(&s.heap, int(t.index))
	} else {
		heap.Push(&s.heap, t)
	}
	gen := t.gen
	wake := s.wait.Pushed(due)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	} else if wake {
		s.wait.Wake()
	}
	return gen
}

// Stop disarms t; a call already under way is made stale.
func (t *Timer) Stop() {
	s := t.s
	s.mu.Lock()
	t.gen++
	if t.index >= 0 {
		heap.Remove(&s.heap, int(t.index))
	}
	idle := len(s.heap) == 0 && s.running
	s.mu.Unlock()
	if idle {
		s.wait.Wake() // let the goroutine end now, not at the old due time
	}
}

// Live reports whether gen is t's current generation and t is not armed
// (it fired and was neither reset nor stopped since).
func (t *Timer) Live(gen uint32) bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.gen == gen && t.index < 0
}

type firing struct {
	t   *Timer
	gen uint32
}

// run is the Sched's goroutine: it calls the functions of the Timers due
// and ends when none is armed.
func (s *Sched) run() {
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	var due []firing
	for {
		s.mu.Lock()
		now := int64(time.Since(s.epoch))
		due = due[:0]
		for len(s.heap) > 0 && s.heap[0].due <= now {
			t := heap.Pop(&s.heap).(*Timer)
			due = append(due, firing{t, t.gen})
		}
		if len(due) == 0 && len(s.heap) == 0 {
			s.running = false
			s.wait.Disarm()
			s.mu.Unlock()
			return
		}
		wait := time.Duration(-1)
		if len(due) == 0 {
			wait = dueheap.Armed(&s.wait, s.heap, now)
		} else {
			s.wait.Disarm()
		}
		s.mu.Unlock()
		for i, f := range due {
			f.t.f(f.gen)
			due[i] = firing{}
		}
		if len(due) > 0 {
			continue
		}
		s.wait.Sleep(timer, wait, nil)
	}
}
