package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// TestDecideRefusalMatrix: each refusing gate, under each rule, for each
// kind it may gate: the verdict, the count, the hooks (Throttled once,
// GaveUp once on a stop), and the limiter token (none kept for an attempt
// not made).
func TestDecideRefusalMatrix(t *testing.T) {
	type gateCase struct {
		name   string
		gate   rebound.Gate
		reason error
		opt    func(t *testing.T) rebound.Option
	}
	gates := []gateCase{
		{"budget", rebound.GateBudget, rebound.ErrBudgetExhausted, func(t *testing.T) rebound.Option {
			return rebound.WithBudget(mustBudget(t, 0, 0, 10*time.Second))
		}},
		{"throttle", rebound.GateThrottle, rebound.ErrThrottled, func(t *testing.T) rebound.Option {
			return rebound.WithThrottle(rejectingThrottle(t))
		}},
		{"breaker", rebound.GateBreaker, rebound.ErrBreakerOpen, func(t *testing.T) rebound.Option {
			return rebound.WithBreaker(&fakeBreaker{open: true})
		}},
	}
	rules := []rebound.Refusal{rebound.RefuseStop, rebound.RefuseDefer, rebound.RefuseDrop}
	kinds := []rebound.AttemptKind{rebound.FirstAttempt, rebound.RetryAttempt, rebound.LookupAttempt}
	for _, g := range gates {
		for _, rule := range rules {
			for _, k := range kinds {
				if k == rebound.LookupAttempt && g.gate != rebound.GateThrottle {
					continue // only the limiter and the throttle gate a lookup
				}
				if k == rebound.FirstAttempt && g.gate == rebound.GateBudget {
					continue // a first attempt deposits: the budget never refuses it
				}
				t.Run(fmt.Sprintf("%s/%d/%v", g.name, rule, k), func(t *testing.T) {
					var h hookCount
					lim := rate.NewLimiter(rate.Every(time.Hour), 1)
					now := t0.Add(time.Second)
					first := rebound.WithAdmission(rebound.FirstAttempt, 0) // a retry's first attempt asks no gate
					r := mustRetrier(t, fixed, g.opt(t), rebound.WithLimiter(lim), h.hooks(),
						rebound.WithRefusal(g.gate, rule), first,
						rebound.WithAdmission(k, rebound.GateLimiter|g.gate))
					s := newLoop(r, now)
					attempts := 0
					if k == rebound.RetryAttempt {
						d := s.decide(now, failed(errors.New("down")))
						attempts = 1
						if g.gate == rebound.GateBudget && rule == rebound.RefuseStop {
							// known at the failure
							if d.Verdict() != rebound.Stop || !errors.Is(d.Err, rebound.ErrBudgetExhausted) || h.gaveUp != 1 || h.throttled != 0 {
								t.Fatalf("failure: %+v, GaveUp %d, Throttled %d; want a stop on the budget, GaveUp once", d, h.gaveUp, h.throttled)
							}
							return
						}
						if d.Verdict() != rebound.WaitFor {
							t.Fatalf("failure: %+v", d)
						}
						h = hookCount{}
					}
					d := s.decide(now, ready(k))
					want := map[rebound.Refusal]rebound.Verdict{rebound.RefuseStop: rebound.Stop, rebound.RefuseDefer: rebound.WaitFor, rebound.RefuseDrop: rebound.Stop}[rule]
					if d.Verdict() != want {
						t.Fatalf("Ready: %+v, want %v", d, want)
					}
					if d.Verdict() == rebound.WaitFor && (!errors.Is(d.Reason, g.reason) || d.Delay <= 0) {
						t.Errorf("deferred: %+v, want a backoff with Reason %v", d, g.reason)
					}
					if d.Verdict() != rebound.WaitFor && !errors.Is(d.Err, g.reason) {
						t.Errorf("%v: Err %v, want %v", d.Verdict(), d.Err, g.reason)
					}
					wantAttempts := attempts
					if rule == rebound.RefuseDefer && k != rebound.LookupAttempt {
						wantAttempts++ // the refused attempt counts, not sent
					}
					if s.Attempts() != wantAttempts || d.Attempt != wantAttempts {
						t.Errorf("attempts %d (Decision %d), want %d", s.Attempts(), d.Attempt, wantAttempts)
					}
					wantGaveUp := 0
					if rule == rebound.RefuseStop && k != rebound.LookupAttempt {
						wantGaveUp = 1 // a refused lookup ends no run
					}
					if h.throttled != 1 || h.gaveUp != wantGaveUp || h.attempted != 0 || h.retried != 0 {
						t.Errorf("hooks: Throttled %d, GaveUp %d, Attempted %d, Retried %d; want 1, %d, 0, 0", h.throttled, h.gaveUp, h.attempted, h.retried, wantGaveUp)
					}
					if !lim.AllowN(now, 1) {
						t.Error("the limiter's one token is gone: the refused attempt kept it")
					}
				})
			}
		}
	}
}

// TestRetrierDoRefusalMatrix: the same refusals in Retrier.Do (first
// attempt and retry): the call ends on a stop or a drop, a deferral is
// retried until the policy runs out; Throttled reported once per refusal,
// GaveUp once.
func TestRetrierDoRefusalMatrix(t *testing.T) {
	for _, gate := range []rebound.Gate{rebound.GateBudget, rebound.GateThrottle, rebound.GateBreaker} {
		for _, rule := range []rebound.Refusal{rebound.RefuseStop, rebound.RefuseDefer, rebound.RefuseDrop} {
			for _, k := range []rebound.AttemptKind{rebound.FirstAttempt, rebound.RetryAttempt} {
				if k == rebound.FirstAttempt && gate == rebound.GateBudget {
					continue
				}
				t.Run(fmt.Sprintf("%#x/%d/%v", gate, rule, k), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						var h hookCount
						var opt rebound.Option
						var reason error
						switch gate {
						case rebound.GateBudget:
							opt, reason = rebound.WithBudget(mustBudget(t, 0, 0, 10*time.Second)), rebound.ErrBudgetExhausted
						case rebound.GateThrottle:
							opt, reason = rebound.WithThrottle(rejectingThrottleAt(t, time.Now())), rebound.ErrThrottled
						default:
							opt, reason = rebound.WithBreaker(&fakeBreaker{open: true}), rebound.ErrBreakerOpen
						}
						const maxAttempts = 4
						other := rebound.FirstAttempt
						if k == rebound.FirstAttempt {
							other = rebound.RetryAttempt
						}
						r := mustRetrier(t, fixed, opt, h.hooks(), rebound.WithMaxAttempts(maxAttempts), rebound.WithRefusal(gate, rule),
							rebound.WithAdmission(k, gate), rebound.WithAdmission(other, 0))
						calls := 0
						err := r.Do(t.Context(), func(context.Context) error { calls++; return errors.New("down") })
						wantCalls := 1
						if k == rebound.FirstAttempt {
							wantCalls = 0
						}
						if k == rebound.FirstAttempt && rule == rebound.RefuseDefer {
							// the retries are not gated: they are sent, and fail
							wantCalls, reason = maxAttempts-1, rebound.ErrExhausted
						}
						if calls != wantCalls || !errors.Is(err, reason) {
							t.Fatalf("Do: %v after %d calls, want %v after %d", err, calls, reason, wantCalls)
						}
						wantThrottled := 1
						if rule == rebound.RefuseDefer && k == rebound.RetryAttempt {
							wantThrottled = maxAttempts - wantCalls
						}
						if gate == rebound.GateBudget && rule == rebound.RefuseStop {
							wantThrottled = 0 // known at the failure: the failed attempt gives up
						}
						if h.throttled != wantThrottled || h.gaveUp != 1 || h.attempted != wantCalls {
							t.Errorf("hooks: Throttled %d, GaveUp %d, Attempted %d; want %d, 1, %d", h.throttled, h.gaveUp, h.attempted, wantThrottled, wantCalls)
						}
					})
				})
			}
		}
	}
}
