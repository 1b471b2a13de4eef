package rebound_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
)

// After an outage a throttle's window holds only failed requests. Before
// issue 26 it then rejected each new request with probability
// requests/(requests+1) until the window forgot the outage, so a process
// with one call waited minutes for nothing once the backend was back. It
// now rejects nothing while its window holds fewer than 20 requests (its
// probes): a process with a few requests is never refused, and one that
// keeps asking a dead backend still sends few.
func TestThrottleProbesAfterOutage(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	// One call's attempts: five into a 10 s outage (all fail), then the
	// retries after it, none yet answered.
	for i, d := range []time.Duration{0, 700 * time.Millisecond, 2100 * time.Millisecond, 5300 * time.Millisecond,
		9800 * time.Millisecond, 14 * time.Second, 25 * time.Second, 41 * time.Second, 70 * time.Second} {
		now := t0.Add(d)
		if p := th.Probability(now); !th.Allow(now) {
			t.Fatalf("request %d at %v rejected locally (probability %.2f) by a throttle that has admitted only %d requests in its window: "+
				"a process with so few requests must reach the backend", i+1, d, p, i)
		}
	}
	// A dead backend asked 1,000 times in a fresh window: the probes and
	// the formula's leak, no more.
	later := t0.Add(10 * time.Minute)
	sent := 0
	for range 1000 {
		if th.Allow(later) {
			sent++
		}
	}
	if sent < 20 || sent > 40 {
		t.Fatalf("%d of 1000 requests to a backend accepting none sent in one window, want the 20 probes and a few more", sent)
	}
	// The window moves on: the next one has its probes again.
	next := later.Add(2 * time.Minute)
	for i := range 20 {
		if !th.Allow(next) {
			t.Fatalf("probe %d of the next window rejected", i+1)
		}
	}
}

// A process that keeps asking a dead backend is throttled by the formula
// alone once its window is full: the first 20 requests it ever makes pass,
// and no window that follows admits another burst of 20 (issue 26's
// 5-minute, 100-subscription test: 307 requests with such bursts, 117
// without). 50 requests a second for 10 windows of 2 minutes: 60,000
// requests, of which the formula leaks about one per 1/(requests+1).
func TestThrottleProbesNoBurstPerWindow(t *testing.T) {
	th, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i := range 60000 {
		if th.Allow(t0.Add(time.Duration(i) * 20 * time.Millisecond)) {
			sent++
		}
	}
	// The leak: about Σ 1/(n+1) at the start, then about one request per
	// window size (6,000 requests) after: a few dozen in all.
	if sent > 20+10*5 {
		t.Fatalf("%d of 60000 requests to a backend accepting none sent over 10 windows, want the first 20 and the formula's leak (at most %d)", sent, 20+10*5)
	}
	t.Logf("%d of 60000 sent", sent)
}

// The probes' threshold under the attacks a shared throttle meets: two
// throttles with one seed decide alike; a clock stepped back starts the
// window anew (its 20 probes again, no more); many goroutines sharing one
// throttle against a dead backend send the first 20 and the leak (-race).
func TestThrottleProbesSeedClockConcurrency(t *testing.T) {
	mk := func() *rebound.AdaptiveThrottle {
		th, err := rebound.NewAdaptiveThrottle(2, time.Second, seeded(7))
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	a, b := mk(), mk()
	var da, db []bool
	for i := range 5000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if i%7 == 0 {
			a.Accepted(now)
			b.Accepted(now)
		}
		da, db = append(da, a.Allow(now)), append(db, b.Allow(now))
	}
	if fmt.Sprint(da) != fmt.Sprint(db) {
		t.Error("two throttles with one seed and one history decided differently")
	}

	th := mk()
	sent := 0
	for range 100 {
		if th.Allow(t0) {
			sent++
		}
	}
	back := t0.Add(-time.Hour) // the clock stepped back: a new window
	for range 100 {
		if th.Allow(back) {
			sent++
		}
	}
	if sent < 40 || sent > 50 {
		t.Errorf("%d of 200 sent in two windows (the second after the clock stepped back), want 2x20 probes and a little leak", sent)
	}

	// Goroutines reading one clock (a tick of 10 µs each request): their
	// times reach the throttle slightly out of order, as time.Now()'s do.
	shared := mk()
	var n, tick atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if shared.Allow(t0.Add(time.Duration(tick.Add(1)) * 10 * time.Microsecond)) {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n.Load() < 20 || n.Load() > 30 {
		t.Errorf("8 goroutines x 1000 requests to a dead backend: %d sent, want the 20 probes and the leak", n.Load())
	}
}
