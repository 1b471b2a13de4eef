package subscriber

import (
	"math"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// stepWall returns tm with its wall-clock reading moved by d (whole
// seconds) and its monotonic reading kept: the time a process read before
// NTP stepped its wall clock by -d, seen after the step. It relies on the
// layout of time.Time (wall: hasMonotonic, 33 bits of seconds since 1885,
// 30 bits of nanoseconds; ext: the monotonic reading) and checks the
// result, so a change of layout fails the test instead of passing it.
func stepWall(t *testing.T, tm time.Time, d time.Duration) time.Time {
	t.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if d%time.Second != 0 || d < 0 {
		t.Fatalf("stepWall(%v): whole non-negative seconds only", d)
	}
	out := tm
	p := (*layout)(unsafe.Pointer(&out))
	if p.wall&(1<<63) == 0 {
		t.Fatal("stepWall: the time has no monotonic reading")
	}
	p.wall += uint64(d/time.Second) << 30
	if got := out.UnixNano() - tm.UnixNano(); got != int64(d) {
		t.Fatalf("stepWall: wall moved by %v, want %v (time.Time layout changed?)", time.Duration(got), d)
	}
	if got := out.Sub(tm); got != 0 {
		t.Fatalf("stepWall: monotonic reading moved by %v (time.Time layout changed?)", got)
	}
	return out
}

// A due time computed before the wall clock stepped back an hour (its
// wall reading is an hour ahead of the clock now, its monotonic reading
// is right) fires after its wait, not an hour later: the scheduler keys
// its heap on the monotonic clock.
func TestSchedulerIgnoresWallClockStep(t *testing.T) {
	var wg sync.WaitGroup
	sc := newScheduler(&wg, make(chan struct{}))
	e := &entry{index: -1}
	due := stepWall(t, time.Now().Add(time.Second), time.Hour)
	sc.set(e, due)
	if wait := time.Duration(e.due - sc.key(time.Now())); wait > 2*time.Second {
		t.Fatalf("a due time 1s away waits %v after the wall clock stepped back 1h", wait.Round(time.Second))
	}
}

// A due time centuries away (WithReconcile, WithEmptyListHold or
// WithConfirmTimeout of centuries) never fires: its key saturates
// instead of overflowing to a time in the past.
func TestSchedulerFarFutureNeverDue(t *testing.T) {
	var wg sync.WaitGroup
	sc := newScheduler(&wg, make(chan struct{}))
	e := &entry{index: -1}
	now := time.Now()
	for _, d := range []time.Duration{250 * 365 * 24 * time.Hour, math.MaxInt64} {
		sc.set(e, now.Add(d))
		if e.due < sc.key(now.Add(200*365*24*time.Hour)) {
			t.Fatalf("a due time %v away is keyed %d: due before 200 years from now", d, e.due)
		}
	}
}
