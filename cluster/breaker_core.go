package cluster

import (
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound/internal/sat"
)

// breakerCore is one target's circuit breaker: gobreaker's state machine
// (its Settings, Counts, generations and rolling windows, with gobreaker's
// rules for each) driven differently in five ways that gobreaker's
// CircuitBreaker cannot be made to take:
//
//   - Closed, a call is admitted with an atomic load and its success
//     counted with one atomic add, no clock read and no lock; the counts
//     are folded in at the next locked step (a failure, an exclusion, a
//     status read, the end of a window, which a timer marks). gobreaker's
//     Execute takes its mutex twice and reads the clock twice per call
//     (about 180 ns). The one difference in Counts: closed, a call counts
//     in Requests when it ends, not when it is admitted (a ReadyToTrip
//     sees the calls still running as not yet made).
//   - With the directory's own trip rule (lazy: it reads only
//     ConsecutiveFailures) a closed success costs one atomic load: it is
//     counted, on the locked path, only when it ends a failure run. The
//     atomic add was half of the breaker's cost per call.
//   - The open timeout grows with consecutive ejections, base × n, up to a
//     maximum (Envoy's ejection time); gobreaker has one Timeout.
//   - Deadlines are monotonic durations since the directory's epoch, with
//     saturating arithmetic: a Timeout of math.MaxInt64 never ends.
//   - No user function runs under its mutex (gobreaker calls ReadyToTrip,
//     IsSuccessful, IsExcluded and OnStateChange under its own).
//
// failsafe-go's breaker has a cheaper permit API but other settings (no
// ReadyToTrip over Counts, no IsExcluded, no gobreaker rolling buckets), so
// WithBreakerSettings could not keep its meaning, and its root module
// brings grpc into every user's build.
type breakerCore struct {
	maxReq           uint32
	interval, bucket time.Duration // interval 0: closed counts are never cleared; bucket 0: one bucket
	base, maxOpen    time.Duration
	readyToTrip      func(gobreaker.Counts) bool
	isSuccessful     func(error) bool
	isExcluded       func(error) bool
	now              func() time.Duration // monotonic, since the directory's epoch
	// changed mirrors a state change; called under mu, it runs no user code.
	changed func(from, to gobreaker.State, now, until time.Duration)

	fast atomic.Pointer[fastWindow] // the closed state's window; nil sends calls to the locked path
	// lazy: the trip rule reads only ConsecutiveFailures (the directory's
	// own), so a closed success is counted only while it ends a failure
	// run; nilOK: a nil error is a success (default classification).
	lazy, nilOK bool

	mu        sync.Mutex
	state     gobreaker.State
	gen       uint64
	flips     uint64 // state changes: a trip decided before one is void
	counts    rollingCounts
	start     time.Duration // of the generation
	expiry    time.Duration // end of the closed interval or of the open timeout; 0 if none
	win       *fastWindow   // the window being counted (published or not)
	timer     *time.Timer   // unpublishes win at the end of its window
	ejections int64         // consecutive ejections: the open timeout's multiplier
	closedAt  time.Duration
	stopped   bool
}

// retired marks a fastWindow's counter once it has been folded for the
// last time: an add that sees it was not counted.
const retired = uint64(1) << 63

// maxBuckets bounds the rolling window (gobreaker allocates
// Interval/BucketPeriod buckets, whatever their number).
const maxBuckets = 1024

// fastWindow counts the closed state's successes of one generation and
// bucket.
type fastWindow struct {
	gen, age uint64
	ok       atomic.Uint64
	streak   atomic.Bool // lazy: a failure run is counted, which a success ends
	folded   uint64      // guarded by breakerCore.mu
}

// admission is what done needs of an admitted call.
type admission struct {
	w        *fastWindow // nil for a locked admission
	gen, age uint64
	half     bool
}

func (c *breakerCore) init(st gobreaker.Settings, maxOpen time.Duration) {
	c.maxReq = max(st.MaxRequests, 1)
	n := 1
	switch {
	case st.Interval <= 0:
	case st.BucketPeriod <= 0:
		c.interval = st.Interval
	default:
		c.bucket = max(st.BucketPeriod, sat.RoundUp(st.Interval, maxBuckets)/maxBuckets)
		c.interval = sat.RoundUp(st.Interval, c.bucket)
		n = int(c.interval / c.bucket)
	}
	c.counts = newRollingCounts(n)
	c.lazy = c.lazy && c.bucket == 0 // rolling buckets: every outcome counts
	c.base, c.maxOpen = st.Timeout, max(maxOpen, st.Timeout)
	c.readyToTrip, c.isSuccessful, c.isExcluded = st.ReadyToTrip, st.IsSuccessful, st.IsExcluded
	c.mu.Lock()
	c.newGeneration(c.now())
	c.mu.Unlock()
}

// allow admits a call or refuses it with gobreaker's error.
func (c *breakerCore) allow() (admission, error) {
	if w := c.fast.Load(); w != nil {
		return admission{w: w, gen: w.gen, age: w.age}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current(c.now())
	switch {
	case c.state == gobreaker.StateOpen:
		return admission{}, gobreaker.ErrOpenState
	case c.state == gobreaker.StateHalfOpen && c.counts.validRequests() >= c.maxReq:
		return admission{}, gobreaker.ErrTooManyRequests
	}
	c.counts.addRequests(1)
	return admission{gen: c.gen, age: c.counts.age, half: c.state == gobreaker.StateHalfOpen}, nil
}

// done counts the outcome of an admitted call. If IsExcluded or
// IsSuccessful panics, the call counts as a failure and the panic goes on
// (a half-open probe left uncounted would stay taken for ever).
func (c *breakerCore) done(a admission, err error) {
	if err == nil && c.nilOK {
		c.count(a, false, true)
		return
	}
	classified := false
	defer func() {
		if !classified {
			c.count(a, false, false)
		}
	}()
	excluded := c.isExcluded != nil && c.isExcluded(err)
	ok := !excluded && c.isSuccessful(err)
	classified = true
	c.count(a, excluded, ok)
}

// quietSuccess reports whether a nil error of the admitted call a needs no
// counting: closed, lazy, default classification and no failure run.
func (c *breakerCore) quietSuccess(a admission) bool {
	return a.w != nil && c.nilOK && c.lazy && !a.w.streak.Load()
}

// count counts a classified outcome of an admitted call.
func (c *breakerCore) count(a admission, excluded, ok bool) {
	if ok && a.w != nil {
		if c.lazy {
			if !a.w.streak.Load() { // nothing the trip rule reads changes
				return
			}
		} else if a.w.ok.Add(1)&retired == 0 {
			return
		}
	}
	c.mu.Lock()
	now := c.now()
	c.current(now)
	if a.w != nil && c.gen == a.gen {
		c.counts.addRequests(1) // admitted by the fast path: counted as it ends
	}
	switch {
	case c.gen != a.gen: // admitted before a state change or a new interval: not counted, as in gobreaker
	case excluded:
		c.counts.onExclusion(a.age)
	case ok:
		c.counts.addSuccesses(a.age, 1)
		if c.state == gobreaker.StateHalfOpen && c.counts.ConsecutiveSuccesses >= c.maxReq {
			c.setState(gobreaker.StateClosed, now)
		}
	case c.state == gobreaker.StateHalfOpen:
		c.setState(gobreaker.StateOpen, now)
	default:
		c.counts.onFailure(a.age)
		counts, flips := c.counts.Counts, c.flips
		c.mu.Unlock()
		trip := c.readyToTrip(counts) // user code: not under mu
		c.mu.Lock()
		// gobreaker trips at once: a closed interval that ended meanwhile
		// does not void it, a state change does
		if trip && c.flips == flips && c.state == gobreaker.StateClosed {
			c.setState(gobreaker.StateOpen, c.now())
		}
	}
	if w := c.win; w != nil && c.lazy {
		w.streak.Store(c.counts.ConsecutiveFailures > 0)
	}
	c.mu.Unlock()
}

// State returns the state now (open becomes half-open here once its
// timeout is over, as in gobreaker).
func (c *breakerCore) State() gobreaker.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current(c.now())
	return c.state
}

// Counts returns gobreaker's Counts, the fast path's included. Lazy and
// closed, Requests and the successes count only the calls that ended a
// failure run.
func (c *breakerCore) Counts() gobreaker.Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fold()
	return c.counts.Counts
}

// probeLeft reports whether a half-open breaker admits another probe.
func (c *breakerCore) probeLeft() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts.validRequests() < c.maxReq
}

// stop ends the window timer of a breaker whose target left.
func (c *breakerCore) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}

// current folds the fast path's counts in and moves the state on to now
// (mu held): a new closed interval or bucket, open to half-open.
func (c *breakerCore) current(now time.Duration) {
	c.fold()
	switch c.state {
	case gobreaker.StateClosed:
		switch {
		case c.expiry != 0 && c.expiry < now:
			c.newGeneration(now)
		case c.bucket > 0 && c.age(now) > c.counts.age:
			c.retire()
			c.counts.grow(c.age(now))
			c.openWindow(now)
		case c.fast.Load() == nil: // the timer fired early, or a window was retired under a call
			c.fast.Store(c.win)
			c.arm(now)
		}
	case gobreaker.StateOpen:
		if c.expiry < now {
			c.setState(gobreaker.StateHalfOpen, now)
		}
	}
}

func (c *breakerCore) age(now time.Duration) uint64 {
	if c.bucket <= 0 || now < c.start {
		return 0
	}
	return uint64((now - c.start) / c.bucket)
}

// fold adds the fast path's counts since the last fold (mu held).
func (c *breakerCore) fold() {
	if w := c.win; w != nil {
		c.apply(w, w.ok.Load()&^retired)
	}
}

func (c *breakerCore) apply(w *fastWindow, ok uint64) {
	n := uint32(ok - w.folded)
	c.counts.addRequests(n)
	c.counts.addSuccesses(w.age, n)
	w.folded = ok
}

// retire folds win for the last time and drops it (mu held): a call that
// adds to it afterwards sees retired and takes the locked path.
func (c *breakerCore) retire() {
	w := c.win
	if w == nil {
		return
	}
	c.fast.CompareAndSwap(w, nil)
	c.apply(w, w.ok.Or(retired)&^retired)
	c.win = nil
}

// openWindow starts the fast path of the current closed generation and
// bucket (mu held).
func (c *breakerCore) openWindow(now time.Duration) {
	c.win = &fastWindow{gen: c.gen, age: c.counts.age}
	c.win.streak.Store(c.lazy && c.counts.ConsecutiveFailures > 0)
	c.fast.Store(c.win)
	c.arm(now)
}

// arm sets the timer that unpublishes the window at its end, so that the
// first call after it takes the locked path and starts the next one. Its
// function only clears a pointer: the goroutine it runs on ends at once,
// and an idle breaker's timer fires once and is not re-armed until a call.
// It holds the breaker weakly: a directory dropped with a timer armed (an
// Interval of an hour) is not kept alive until it fires.
func (c *breakerCore) arm(now time.Duration) {
	end := c.expiry
	if c.bucket > 0 { // the end of the current bucket
		end = sat.Max
		if k := c.counts.age + 1; k <= uint64(sat.Max/c.bucket) {
			end = sat.Add(c.start, time.Duration(k)*c.bucket)
		}
	}
	if end == 0 || c.stopped {
		return
	}
	wait := sat.Add(end-now, 1) // strictly after: expiry < now ends a window
	if c.timer == nil {
		fast := weak.Make(&c.fast)
		c.timer = time.AfterFunc(wait, func() {
			if f := fast.Value(); f != nil {
				f.Store(nil)
			}
		})
		return
	}
	c.timer.Reset(wait)
}

// newGeneration clears the counts and sets the deadlines of the state just
// entered (mu held), as gobreaker's toNewGeneration.
func (c *breakerCore) newGeneration(now time.Duration) {
	c.retire()
	c.gen++
	c.start = now
	c.counts.clear()
	c.expiry = 0
	switch c.state {
	case gobreaker.StateClosed:
		if c.interval > 0 && c.bucket == 0 {
			c.expiry = sat.Add(now, c.interval)
		}
		c.openWindow(now)
	case gobreaker.StateOpen:
		c.expiry = sat.Add(now, c.openTimeout())
	}
}

// openTimeout is base × consecutive ejections, at most maxOpen.
func (c *breakerCore) openTimeout() time.Duration {
	n := time.Duration(max(c.ejections, 1))
	if c.base > c.maxOpen/n {
		return c.maxOpen
	}
	return c.base * n
}

func (c *breakerCore) setState(to gobreaker.State, now time.Duration) {
	from := c.state
	if from == to {
		return
	}
	switch {
	case to == gobreaker.StateOpen && (from == gobreaker.StateHalfOpen || now-c.closedAt < c.base):
		// a failed probe, or a target that tripped again within an open
		// timeout of closing: the same outage, a longer ejection
		c.ejections = min(c.ejections+1, 1<<31)
	case to == gobreaker.StateOpen:
		c.ejections = 1
	case to == gobreaker.StateClosed:
		c.closedAt = now
	}
	c.state = to
	c.flips++
	c.newGeneration(now)
	c.changed(from, to, now, c.expiry)
}
