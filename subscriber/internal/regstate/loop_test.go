package regstate

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSchedFiresInOrderAndEnds: timers fire at their due times, in order,
// a stopped or reset one never at its old time, and the Sched's goroutine
// ends once nothing is armed.
func TestSchedFiresInOrderAndEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSched()
		start := time.Now()
		var mu sync.Mutex
		fired := map[string]time.Duration{}
		mk := func(name string) *Timer {
			return s.NewTimer(func(uint32) {
				mu.Lock()
				fired[name] = time.Since(start)
				mu.Unlock()
			})
		}
		a, b, c := mk("a"), mk("b"), mk("c")
		a.Reset(3 * time.Second)
		b.Reset(time.Second)
		c.Reset(2 * time.Second)
		c.Stop()
		a.Reset(5 * time.Second)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(fired) != 2 || fired["a"] != 5*time.Second || fired["b"] != time.Second {
			t.Fatalf("fired = %v, want a at 5s and b at 1s, c never", fired)
		}
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if running {
			t.Fatal("the Sched's goroutine still runs with nothing armed")
		}
	})
}

// TestSchedStopEndsGoroutineAtOnce: stopping the last armed timer ends the
// goroutine now, not at the timer's old due time.
func TestSchedStopEndsGoroutineAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSched()
		tm := s.NewTimer(func(uint32) { t.Error("a stopped timer fired") })
		tm.Reset(time.Hour)
		synctest.Wait()
		tm.Stop()
		synctest.Wait() // returns only when the goroutine is gone or durably blocked
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if running {
			t.Fatal("the Sched's goroutine still runs after its last timer was stopped")
		}
	})
}

// TestTimerLive: a firing is live until the timer is reset or stopped.
func TestTimerLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSched()
		gens := make(chan uint32, 1)
		tm := s.NewTimer(func(g uint32) { gens <- g })
		tm.Reset(time.Second)
		g := <-gens
		if !tm.Live(g) {
			t.Fatal("a firing not followed by Reset or Stop is not live")
		}
		tm.Reset(time.Minute)
		if tm.Live(g) {
			t.Fatal("a firing followed by Reset is live")
		}
		tm.Stop()
	})
}

// TestLoopRunsStepsOneAtATimeAndEnds: steps run in order, one at a time,
// with no goroutine while idle; a step returning false ends the loop (the
// rest is dropped, onEnd runs once, Post refuses).
func TestLoopRunsStepsOneAtATimeAndEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ends := 0
		l := NewLoop(func() { ends++ }, nil)
		var got []int
		for i := range 3 {
			l.Post(func() bool { got = append(got, i); time.Sleep(time.Second); return true })
		}
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(got) != 3 || got[0] != 0 || got[2] != 2 {
			t.Fatalf("steps ran %v, want [0 1 2]", got)
		}
		g0 := runtime.NumGoroutine()
		l.Post(func() bool { return false })
		l.Post(func() bool { t.Error("a step after the last ran"); return true })
		<-l.Done()
		synctest.Wait()
		if ends != 1 || l.Post(func() bool { return true }) {
			t.Fatalf("onEnd ran %d times (want 1), or Post accepted a step after the end", ends)
		}
		if n := runtime.NumGoroutine(); n > g0 {
			t.Fatalf("%d goroutines after the loop ended, %d before", n, g0)
		}
		l.Stop() // idempotent
	})
}

// TestLoopStopWaitsForTheStepRunning: Stop during a step ends the loop
// when the step returns, not before.
func TestLoopStopWaitsForTheStepRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ended := false
		l := NewLoop(func() { ended = true }, nil)
		l.Post(func() bool { <-release; return true })
		synctest.Wait()
		l.Stop()
		synctest.Wait()
		select {
		case <-l.Done():
			t.Fatal("the loop ended while a step was running")
		default:
		}
		close(release)
		<-l.Done()
		if !ended {
			t.Fatal("onEnd did not run")
		}
	})
}

// TestLoopDoRunsInlineWhenIdle: Do runs its step on the caller's
// goroutine when no step runs, queues it behind a running one, and hands
// steps queued during it to a goroutine of their own.
func TestLoopDoRunsInlineWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop(nil, nil)
		var order []string
		inline := false
		l.Do(func() bool {
			inline = true
			l.Post(func() bool { order = append(order, "posted"); return true })
			order = append(order, "do")
			return true
		})
		if !inline {
			t.Fatal("Do on an idle loop did not run its step before returning")
		}
		synctest.Wait()
		if len(order) != 2 || order[0] != "do" || order[1] != "posted" {
			t.Fatalf("steps ran %v, want [do posted]", order)
		}
		release := make(chan struct{})
		l.Post(func() bool { <-release; return true })
		synctest.Wait()
		ran := false
		l.Do(func() bool { ran = true; return true })
		if ran {
			t.Fatal("Do ran its step beside a running one")
		}
		close(release)
		synctest.Wait()
		if !ran {
			t.Fatal("Do's queued step never ran")
		}
		if !l.Do(func() bool { return false }) {
			t.Fatal("Do refused a step of a live loop")
		}
		<-l.Done()
		if l.Do(func() bool { return true }) {
			t.Fatal("Do accepted a step after the loop ended")
		}
	})
}
