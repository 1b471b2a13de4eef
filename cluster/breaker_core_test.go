package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

var errExcluded = errors.New("excluded")

// newTestCore is a breakerCore alone, on the bubble's clock, recording its
// state changes.
func newTestCore(st gobreaker.Settings, maxOpen time.Duration, changes *[]string) *breakerCore {
	return newTestCoreLazy(st, maxOpen, changes, false)
}

// newTestCoreLazy is newTestCore counting as the directory's own trip
// rule lets it (lazy: closed successes only end failure runs).
func newTestCoreLazy(st gobreaker.Settings, maxOpen time.Duration, changes *[]string, lazy bool) *breakerCore {
	epoch := time.Now()
	c := &breakerCore{now: func() time.Duration { return time.Since(epoch) }, lazy: lazy}
	c.changed = func(from, to gobreaker.State, _, _ time.Duration) {
		*changes = append(*changes, from.String()+">"+to.String())
	}
	c.init(st, maxOpen)
	return c
}

// TestBreakerCoreMatchesGobreaker drives gobreaker's CircuitBreaker and
// breakerCore with the same calls, outcomes and waits, for several
// Settings, and compares the admissions, the states, the Counts and the
// state changes after every step: the closed state's fast path keeps
// gobreaker's semantics.
func TestBreakerCoreMatchesGobreaker(t *testing.T) {
	settings := map[string]gobreaker.Settings{
		"consecutive": {Timeout: time.Second,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 }},
		"ratio, interval, 2 probes": {Timeout: time.Second, Interval: 3 * time.Second, MaxRequests: 2,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.Requests >= 4 && c.TotalFailures*2 >= c.Requests }},
		"rolling buckets, exclusions": {Timeout: 2 * time.Second, Interval: 4 * time.Second, BucketPeriod: time.Second,
			IsExcluded:  func(err error) bool { return errors.Is(err, errExcluded) },
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.TotalFailures >= 3 }},
	}
	for name, st := range settings {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { compareWithGobreaker(t, st, seed, false) })
			})
		}
	}
}

// TestBreakerCoreLazyMatchesGobreaker: with the directory's own trip rule
// (consecutive failures), closed successes are counted only when they end
// a failure run; admissions, states, state changes and ConsecutiveFailures
// are gobreaker's, and so are all Counts once open or half-open.
func TestBreakerCoreLazyMatchesGobreaker(t *testing.T) {
	settings := map[string]gobreaker.Settings{
		"consecutive":          {Timeout: time.Second},
		"interval, 2 probes":   {Timeout: time.Second, Interval: 3 * time.Second, MaxRequests: 2},
		"exclusions, 3 probes": {Timeout: 2 * time.Second, MaxRequests: 3, IsExcluded: func(err error) bool { return errors.Is(err, errExcluded) }},
	}
	for name, st := range settings {
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 }
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { compareWithGobreaker(t, st, seed, true) })
			})
		}
	}
}

func compareWithGobreaker(t *testing.T, st gobreaker.Settings, seed uint64, lazy bool) {
	var theirs, ours []string
	gst := st
	gst.OnStateChange = func(_ string, from, to gobreaker.State) { theirs = append(theirs, from.String()+">"+to.String()) }
	gb := gobreaker.NewCircuitBreaker[any](gst)
	if st.IsSuccessful == nil {
		st.IsSuccessful = func(err error) bool { return err == nil }
	}
	c := newTestCoreLazy(st, 0, &ours, lazy)
	r := rand.New(rand.NewPCG(seed, 1))
	var log strings.Builder
	for step := range 300 {
		var err error
		switch n := r.IntN(10); {
		case n < 5:
		case n < 8:
			err = errDown
		case n < 9:
			err = errExcluded
		default:
			time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
			fmt.Fprintf(&log, " sleep")
			continue
		}
		_, gerr := gb.Execute(func() (any, error) { return nil, err })
		gAdmitted := gerr == nil || gerr == err
		a, oerr := c.allow()
		if oerr == nil {
			c.done(a, err)
		}
		fmt.Fprintf(&log, " %v", err)
		if gAdmitted != (oerr == nil) || !gAdmitted && !errors.Is(oerr, gerr) {
			t.Fatalf("step %d: gobreaker %v, ours %v; after%s", step, gerr, oerr, log.String())
		}
		if gs, os := gb.State(), c.State(); gs != os {
			t.Fatalf("step %d: state gobreaker %v, ours %v; after%s", step, gs, os, log.String())
		}
		gc, oc := gb.Counts(), c.Counts()
		if lazy && gb.State() == gobreaker.StateClosed {
			gc = gobreaker.Counts{ConsecutiveFailures: gc.ConsecutiveFailures, TotalFailures: gc.TotalFailures, TotalExclusions: gc.TotalExclusions}
			oc = gobreaker.Counts{ConsecutiveFailures: oc.ConsecutiveFailures, TotalFailures: oc.TotalFailures, TotalExclusions: oc.TotalExclusions}
		}
		if gc != oc {
			t.Fatalf("step %d: counts gobreaker %+v, ours %+v; after%s", step, gc, oc, log.String())
		}
	}
	if len(theirs) < 2 {
		t.Fatalf("%d state changes: the run never opened and left open", len(theirs))
	}
	if g, o := strings.Join(theirs, " "), strings.Join(ours, " "); g != o {
		t.Fatalf("state changes: gobreaker %q, ours %q", g, o)
	}
}

// call makes one call through c with outcome err; it reports whether c
// admitted it.
func call(c *breakerCore, err error) bool {
	a, refused := c.allow()
	if refused != nil {
		return false
	}
	c.done(a, err)
	return true
}

// TestBreakerCoreWindowEndsWithoutClockRead: closed, calls take the fast
// path (no clock read); the end of an Interval is still noticed, so the
// first failure after it counts in the new interval, as in gobreaker,
// instead of being dropped as a call of the old one.
func TestBreakerCoreWindowEndsWithoutClockRead(t *testing.T) {
	for _, st := range []gobreaker.Settings{
		{Interval: time.Second},
		{Interval: 2 * time.Second, BucketPeriod: time.Second},
	} {
		t.Run(fmt.Sprint("buckets ", st.BucketPeriod), func(t *testing.T) { synctestWindow(t, st) })
	}
}

func synctestWindow(t *testing.T, st gobreaker.Settings) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		st.Timeout = time.Minute
		st.IsSuccessful = func(err error) bool { return err == nil }
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.TotalFailures >= 1 && c.TotalSuccesses <= 1 }
		c := newTestCore(st, 0, &changes)
		for range 5 {
			call(c, nil)
		}
		time.Sleep(3 * time.Second)
		call(c, nil)
		call(c, errDown)
		if got := strings.Join(changes, " "); got != "closed>open" {
			t.Errorf("Settings %+v: state changes %q, want closed>open (1 success, 1 failure in the new window)", st, got)
		}
	})
}

// TestBreakerCoreOpenTimeoutGrows: with WithMaxOpenTimeout, each failed
// probe makes the next ejection one base longer, up to the maximum; a
// breaker that trips again soon after closing keeps its multiplier; one
// that stayed closed for an open timeout starts from the base.
func TestBreakerCoreOpenTimeoutGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		st := gobreaker.Settings{Timeout: 10 * time.Second, IsSuccessful: func(err error) bool { return err == nil },
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}
		c := newTestCore(st, 35*time.Second, &changes)
		openFor := func() time.Duration {
			t.Helper()
			start := time.Now()
			for c.State() == gobreaker.StateOpen {
				time.Sleep(time.Second)
			}
			return time.Since(start)
		}
		call(c, errDown)
		var got []time.Duration
		for range 4 { // a failed probe each time
			got = append(got, openFor())
			call(c, errDown)
		}
		got = append(got, openFor())
		call(c, nil) // a good probe closes it
		time.Sleep(5 * time.Second)
		call(c, errDown) // trips again 5 s after closing: the same outage
		got = append(got, openFor())
		call(c, nil)
		time.Sleep(10 * time.Second)
		call(c, errDown) // closed for a whole open timeout: a new outage
		got = append(got, openFor())
		want := []time.Duration{10, 20, 30, 35, 35, 35, 10}
		for i := range want {
			want[i] *= time.Second
		}
		// openFor polls each second: the state changes at the first look
		// after the timeout, one second after it in this loop.
		for i := range got {
			got[i] -= time.Second
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("open for %v, want %v", got, want)
		}
	})
}
