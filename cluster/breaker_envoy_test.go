package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
)

// TestBreakerEjectionTimeGrows: through the directory, a failed probe
// keeps the target out for base × consecutive ejections, up to
// WithMaxOpenTimeout; BreakerStatus and the *BreakerOpenError say so.
func TestBreakerEjectionTimeGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(2)
		ps[0].failing.Store(true)
		d, err := NewBreakerDirectory(static(ps), WithOpenTimeout(10*time.Second), WithMaxOpenTimeout(25*time.Second),
			WithConsecutiveFailures(1), WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		var got []time.Duration
		callTarget(t, d, "a", 1)
		for range 4 {
			open := d.Open()
			if len(open) != 1 || open[0].State != gobreaker.StateOpen {
				t.Fatalf("Open() = %+v, want a open", open)
			}
			got = append(got, open[0].Until.Sub(open[0].Since))
			time.Sleep(time.Until(open[0].Until) + time.Millisecond)
			if errs := callTarget(t, d, "a", 1); !errors.Is(errs[0], errDown) { // the probe fails
				t.Fatalf("probe: %v, want the provider's error", errs[0])
			}
		}
		if want := "[10s 20s 25s 25s]"; fmt.Sprint(got) != want {
			t.Errorf("ejections lasted %v, want %s", got, want)
		}
		ps[0].failing.Store(false)
		time.Sleep(26 * time.Second)
		if errs := callTarget(t, d, "a", 1); errs[0] != nil {
			t.Fatalf("good probe: %v", errs[0])
		}
		if open := d.Open(); len(open) != 0 {
			t.Errorf("after a good probe Open() = %+v, want none", open)
		}
	})
}

// TestBreakerNeverMoreThanShareEjected: whatever fails and whenever, List
// never leaves out more than floor(share × targets) (half by default): the
// cap holds through trips, half-open probes, failed probes, growing
// ejections and recoveries.
func TestBreakerNeverMoreThanShareEjected(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 2))
				n := 1 + r.IntN(7)
				ps := providers(n)
				d, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1+r.IntN(3)),
					WithOpenTimeout(time.Second), WithMaxOpenTimeout(5*time.Second))
				maxOut := n / 2
				most := 0
				for step := range 400 {
					if r.IntN(8) == 0 {
						p := ps[r.IntN(n)]
						p.failing.Store(!p.failing.Load())
					}
					ivs, err := d.List(context.Background(), &Invocation{})
					if err != nil {
						t.Fatalf("step %d: List: %v (with share 0.5 some target is always listed)", step, err)
					}
					out := 0
					for _, s := range d.breakers() {
						if s.Ejected {
							out++
						}
					}
					if n-len(ivs) > maxOut || out > maxOut {
						t.Fatalf("step %d: %d of %d targets listed, %d ejected: more than %d out", step, len(ivs), n, out, maxOut)
					}
					most = max(most, out)
					_, _ = ivs[r.IntN(len(ivs))].Invoke(context.Background(), &Invocation{})
					time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
				}
				if maxOut > 0 && most == 0 {
					t.Errorf("nothing was ever ejected: the run tested nothing")
				}
			})
		})
	}
}

// TestBreakerDurationOptions: every duration option of package cluster
// (WithMaxOpenTimeout, and the Settings' Timeout,
// Interval and BucketPeriod that WithBreakerSettings passes) with 0, 1 ns,
// a negative value and math.MaxInt64: refused with an error naming the
// option and the rule, or accepted with a sane meaning (a breaker that
// trips, ejects for about that long, and never spins).
func TestBreakerDurationOptions(t *testing.T) {
	values := []time.Duration{0, 1, -time.Second, math.MaxInt64}
	for _, v := range values {
		for _, opt := range []struct {
			name string
			opt  Option
		}{
			{"WithMaxOpenTimeout", WithMaxOpenTimeout(v)},
		} {
			t.Run(fmt.Sprint(opt.name, "/", int64(v)), func(t *testing.T) {
				_, err := NewBreakerDirectory(NewStaticDirectory(invokers("a")...), opt.opt)
				if v <= 0 {
					want := fmt.Sprintf("cluster.%s: d must be > 0, got %v", opt.name, v)
					if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
						t.Errorf("error %v, want one saying %q", err, want)
					}
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				open := v
				if opt.name == "WithMaxOpenTimeout" {
					open = defaultOpenTimeout // the first ejection lasts the base
				}
				checkEjection(t, []Option{opt.opt}, open, gobreaker.Settings{})
			})
		}
		for _, f := range []string{"Timeout", "Interval", "BucketPeriod"} {
			t.Run(fmt.Sprint("Settings.", f, "/", int64(v)), func(t *testing.T) {
				st := gobreaker.Settings{Interval: time.Minute}
				switch f {
				case "Timeout":
					st.Timeout = v
				case "Interval":
					st.Interval = v
				default:
					st.BucketPeriod = v
				}
				open := v
				if f != "Timeout" || v <= 0 {
					open = defaultOpenTimeout // gobreaker's rule: a Timeout <= 0 takes the default
				}
				checkEjection(t, nil, open, st)
			})
		}
	}
}

// checkEjection trips the breaker of one of two targets and checks that
// it is out for open (its Until) and listed again after it, with no busy
// List in between.
func checkEjection(t *testing.T, opts []Option, open time.Duration, st gobreaker.Settings) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ps := providers(2)
		ps[0].failing.Store(true)
		opts = append(opts, WithConsecutiveFailures(1), WithBreakerSettings(func(string) gobreaker.Settings { return st }))
		d, err := NewBreakerDirectory(static(ps), opts...)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // calls on the fast path, then the trip
			callTarget(t, d, "b", 1)
		}
		callTarget(t, d, "a", 1)
		s := d.Open()
		if len(s) != 1 || s[0].Target != "a" {
			t.Fatalf("Open() = %+v, want a", s)
		}
		if want := sat2262(s[0].Since, open); !s[0].Until.Equal(want) {
			t.Errorf("Until %v, want %v (Since + %v)", s[0].Until, want, open)
		}
		if got := strings.Join(listed(t, d), ","); got != "b" {
			t.Errorf("listed %q, want b", got)
		}
		if open > time.Hour {
			return
		}
		time.Sleep(open + time.Millisecond)
		if got := strings.Join(listed(t, d), ","); got != "a,b" {
			t.Errorf("after the open timeout listed %q, want a,b", got)
		}
	})
}

// sat2262 is since + d, at most the largest time UnixNano can hold.
func sat2262(since time.Time, d time.Duration) time.Time {
	if limit := time.Unix(0, math.MaxInt64); since.Add(d).After(limit) || since.Add(d).Before(since) {
		return limit
	}
	return since.Add(d)
}
