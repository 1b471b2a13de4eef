package etcdtest_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// The package's duration options with 0, 1 ns, a negative value and
// math.MaxInt64: a value etcd would not run with is refused by NewCluster,
// before anything starts, naming the option, the argument and the rule.
// A huge tick wrapped 5 x tick around, so that an election below the tick
// was accepted (and etcd refused to start).
func TestDurationOptionsSweep(t *testing.T) {
	vals := []time.Duration{0, 1, -time.Second, math.MaxInt64}
	type tc struct {
		name string
		opt  etcdtest.Option
		arg  string // "": accepted
	}
	var cases []tc
	for _, d := range vals {
		if d != math.MaxInt64 {
			// tick d with the default election: only 1 ms <= tick <= 10 s can pass.
			cases = append(cases, tc{"WithElection tick " + d.String(), etcdtest.WithElection(d, time.Second), "tick"})
		}
		cases = append(cases, tc{"WithElection election " + d.String(), etcdtest.WithElection(10*time.Millisecond, d), "election"})
		if d <= 0 {
			cases = append(cases, tc{"WithStartTimeout " + d.String(), etcdtest.WithStartTimeout(d), "d"})
		}
	}
	cases = append(cases,
		tc{"WithElection tick 2^61", etcdtest.WithElection(1<<61, time.Millisecond), "election"},
		tc{"WithElection tick MaxInt64", etcdtest.WithElection(math.MaxInt64, math.MaxInt64), "election"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, err := etcdtest.NewCluster(1, c.opt, etcdtest.WithDir(t.TempDir()))
			if cl != nil {
				_ = cl.Close()
			}
			var ae *rebound.ArgumentError
			if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(ae.Reason, "must") {
				t.Fatalf("NewCluster = %v; want an ArgumentError naming %s and its rule", err, c.arg)
			}
		})
	}
	t.Run("WithStartTimeout 1ns", func(t *testing.T) {
		cl, err := etcdtest.NewCluster(1, etcdtest.WithStartTimeout(1), etcdtest.WithDir(t.TempDir()))
		if err == nil {
			_ = cl.Close()
			t.Fatal("NewCluster with a 1ns start timeout succeeded; want the timeout")
		}
	})
}
