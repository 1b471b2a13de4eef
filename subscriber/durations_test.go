package subscriber_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// sweepValues are the values every duration option is tried with.
var sweepValues = []time.Duration{0, 1, -time.Second, math.MaxInt64}

// checkVerdict fails unless err is nil for an accepted value, or an
// ArgumentError of fn stating a rule for a refused one.
func checkVerdict(t *testing.T, fn string, d time.Duration, accepted bool, err error) {
	t.Helper()
	var ae *rebound.ArgumentError
	switch {
	case accepted && err != nil:
		t.Fatalf("%s(%d) = %v; want it accepted", fn, d, err)
	case !accepted && (!errors.As(err, &ae) || ae.Func != fn || !strings.Contains(ae.Reason, "must")):
		t.Fatalf("%s(%d) = %v; want an ArgumentError of %s stating the rule", fn, d, err, fn)
	}
}

// Every duration option of the Manager with 0, 1 ns, a negative value and
// math.MaxInt64: refused with an error naming the option and the rule, or
// accepted, and then a Manager that goes through a registry restart, an
// emptied service and Refresh calls for two minutes makes a bounded number
// of registry requests (no busy loop) and delivers the list back.
func TestDurationOptionsSweep(t *testing.T) {
	for _, tc := range []struct {
		fn  string
		opt func(time.Duration) subscriber.Option
		ok  func(time.Duration) bool
	}{
		{"subscriber.WithEmptyListHold", func(d time.Duration) subscriber.Option { return subscriber.WithEmptyListHold(d) },
			func(d time.Duration) bool { return d >= 0 }},
		{"subscriber.WithConfirmTimeout", func(d time.Duration) subscriber.Option { return subscriber.WithConfirmTimeout(d) },
			func(d time.Duration) bool { return d > 0 }},
		{"subscriber.WithRefreshInterval", func(d time.Duration) subscriber.Option { return subscriber.WithRefreshInterval(d) },
			func(d time.Duration) bool { return d > 0 }},
		{"subscriber.WithReconcile", func(d time.Duration) subscriber.Option { return subscriber.WithReconcile(d) },
			func(d time.Duration) bool { return d == 0 || d >= subscriber.MinReconcilePeriod }},
	} {
		for _, d := range sweepValues {
			t.Run(tc.fn+"/"+d.String(), func(t *testing.T) {
				m, err := subscriber.New(subscribertest.New(), tc.opt(d))
				if m != nil {
					_ = m.Close()
				}
				checkVerdict(t, tc.fn, d, tc.ok(d), err)
				if tc.ok(d) {
					sweepScenario(t, tc.opt(d), [2]time.Duration{})
				}
			})
		}
	}
	for _, tc := range []struct {
		arg string
		grp func(time.Duration) [2]time.Duration // linger, refresh
	}{
		{"linger", func(d time.Duration) [2]time.Duration { return [2]time.Duration{d, 0} }},
		{"refresh", func(d time.Duration) [2]time.Duration { return [2]time.Duration{0, d} }},
	} {
		for _, d := range sweepValues {
			t.Run("subscriber.Manager.NewWatchGroup/"+tc.arg+"/"+d.String(), func(t *testing.T) {
				m, err := subscriber.New(subscribertest.New())
				if err != nil {
					t.Fatal(err)
				}
				grp := tc.grp(d)
				_, err = m.NewWatchGroup(grp[0], grp[1])
				_ = m.Close()
				checkVerdict(t, "subscriber.Manager.NewWatchGroup", d, d >= 0, err)
				if d >= 0 {
					sweepScenario(t, nil, grp)
				}
			})
		}
	}
	for _, d := range sweepValues {
		t.Run("subscriber.Drain/"+d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				stopped := false
				err := subscriber.Drain(ctx, d, func(context.Context) error { stopped = true; return nil })
				checkVerdict(t, "subscriber.Drain", d, d >= 0, err)
				if d >= 0 && !stopped {
					t.Fatalf("Drain(wait %v) did not stop", d)
				}
			})
		})
	}
}

// sweepScenario runs a Manager (with opt) and a View of its own group
// (with gopt) through two minutes of a registry's life.
func sweepScenario(t *testing.T, opt subscriber.Option, grp [2]time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, reg, opt, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: 4 * time.Second}))
		g, err := m.NewWatchGroup(grp[0], grp[1])
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		v, err := g.Watch(orders)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		requests := func() int { s := reg.Stats(); return s.Subscribes + s.Lookups }
		for i := range 120 {
			switch i {
			case 10:
				reg.Restart()
			case 30:
				reg.SetDown(true)
			case 50:
				reg.SetDown(false)
			case 60:
				reg.Set(orders)
			case 90:
				reg.Set(orders, inst("10.0.0.2"))
			}
			v.Refresh()
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if n := requests(); n > 200 {
			t.Errorf("%d registry requests in two minutes; want a paced few", n)
		}
		if l := v.Snapshot().List; len(l) != 1 || l[0].IP != "10.0.0.2" {
			t.Errorf("after two minutes the view shows %v, want 10.0.0.2", l)
		}
		_ = v.Close()
	})
}
