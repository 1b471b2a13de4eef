package nacos_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestDurationOptions: every duration option of the package with 0,
// 1 ns, a negative value and math.MaxInt64 is accepted (with a meaning
// that sends no request storm and polls in no busy loop) or refused with
// an *rebound.ArgumentError naming the option and the rule.
func TestDurationOptions(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	values := []time.Duration{0, time.Nanosecond, -time.Second, math.MaxInt64}
	type want map[time.Duration]bool // accepted
	reg := []struct {
		name string
		opt  func(time.Duration) nacos.Option
		ok   want
	}{
		{"nacos.WithRedoGrace", nacos.WithRedoGrace, want{time.Nanosecond: true, math.MaxInt64: true}},
		{"nacos.WithCheckInterval", nacos.WithCheckInterval, want{0: true, math.MaxInt64: true}},
	}
	for i, o := range reg {
		for j, d := range values {
			g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "svc" + string(rune('a'+i*len(values)+j))}, inst("10.0.0.1", 8080), o.opt(d))
			check(t, o.name, d, o.ok[d], err)
			if g != nil {
				if err := g.Shutdown(context.Background()); err != nil {
					t.Fatalf("%s(%v): Shutdown = %v", o.name, d, err)
				}
			}
		}
	}
	newReg := []struct {
		name string
		opt  func(time.Duration) nacos.Option
		ok   want
	}{
		{"nacos.WithPollInterval", func(d time.Duration) nacos.Option { return nacos.WithPollInterval(d, d) }, want{math.MaxInt64: true}},
		{"nacos.WithEvidenceWindow", func(d time.Duration) nacos.Option { return nacos.WithEvidenceWindow(d, d) }, want{time.Nanosecond: true, math.MaxInt64: true}},
	}
	for _, o := range newReg {
		for _, d := range values {
			r, err := nacos.New(c, o.opt(d))
			check(t, o.name, d, o.ok[d], err)
			if r != nil {
				_ = r.Close()
			}
		}
	}
}

func check(t *testing.T, name string, d time.Duration, ok bool, err error) {
	t.Helper()
	var ae *rebound.ArgumentError
	switch {
	case ok && err != nil:
		t.Errorf("%s(%v) = %v, want it accepted", name, d, err)
	case !ok && (!errors.As(err, &ae) || ae.Func != name || !strings.Contains(ae.Reason, "must")):
		t.Errorf("%s(%v) = %v, want an *rebound.ArgumentError of %s stating the rule", name, d, err, name)
	}
}

// TestHugeCheckIntervalChecksNothing: WithCheckInterval(math.MaxInt64)
// means no periodic check; the one check an Update is followed by is
// the only one. (The jitter overflowed: checks fired at once, again and
// again.)
func TestHugeCheckIntervalChecksNothing(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	var checks atomic.Int64
	in := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in,
		nacos.WithCheckInterval(math.MaxInt64), nacos.WithRedoGrace(10*time.Millisecond),
		nacos.WithPolicy(rebound.Policy{}, rebound.WithObserver(registrationHooks{Attempted: func(a regAttempt) {
			if a.Op == "check" {
				checks.Add(1)
			}
		}})))
	in.Weight = 2
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the check after the Update", func() bool { return checks.Load() >= 1 })
	// Shutdown's own lookups are deregister attempts, not checks: once it
	// returns, the loop has ended and the count is final.
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("%d checks, want 1 (the Update's): WithCheckInterval(math.MaxInt64) must mean no periodic check", n)
	}
}
