package subscriber_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// errRejected is what a registry rejecting everything returns (transient).
var errRejected = errors.New("registry rejects every request")

// outage is a registry that rejects every Subscribe (no connection event:
// a server that answers, and answers no) until ok is called.
func outage(reg *subscribertest.Registry) (ok func()) {
	reg.SetFailure(func(subscriber.Key) error { return errRejected })
	return func() { reg.SetFailure(nil) }
}

func subscribeN(t *testing.T, m *subscriber.Manager, n int) []*subscriber.Subscription {
	t.Helper()
	subs := make([]*subscriber.Subscription, n)
	for i := range subs {
		subs[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
	}
	return subs
}

// waitAllSubscribed advances virtual time until every subscription of m is
// subscribed, for at most limit; it returns the time it took.
func waitAllSubscribed(t *testing.T, m *subscriber.Manager, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		synctest.Wait()
		if c := m.Counts(); c.ByState[subscriber.StateSubscribed] == n {
			return time.Since(start)
		}
		time.Sleep(time.Second)
	}
	c := m.Counts()
	t.Fatalf("after %v, %d of %d subscriptions subscribed (%+v)", limit, c.ByState[subscriber.StateSubscribed], n, c.ByState)
	return 0
}

// With a throttle fed by a registry that rejects everything, the Manager
// sends far fewer requests during the outage than the same Manager without
// one, never gives up, and every subscription is back once the registry
// accepts again.
func TestThrottleDefersAttemptsDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, down = 100, 5 * time.Minute
		plainReg, thrReg := subscribertest.New(), subscribertest.New()
		plainOK, thrOK := outage(plainReg), outage(thrReg)
		thr, err := rebound.NewAdaptiveThrottle(2, 30*time.Second, seeded(1))
		if err != nil {
			t.Fatal(err)
		}
		var deferred atomic.Int64
		reader := sdkmetric.NewManualReader()
		plain := newManager(t, plainReg)
		m := newManager(t, thrReg, subscriber.WithThrottle(thr), subscriber.WithThrottle(nil),
			subscriber.WithPolicy(rebound.Policy{}, rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
				rebound.WithObserver(subscriber.Hooks{Deferred: func(d subscriber.Deferral) {
					if !errors.Is(d.Reason, rebound.ErrThrottled) || d.Delay < 0 {
						t.Errorf("deferral %+v, want ErrThrottled and a delay", d)
					}
					deferred.Add(1)
				}})))
		subscribeN(t, plain, n)
		subscribeN(t, m, n)
		time.Sleep(down)
		synctest.Wait()
		plainSent, thrSent := plainReg.Stats().Subscribes, thrReg.Stats().Subscribes
		t.Logf("requests sent during a %v outage by %d subscriptions: %d without throttle, %d with (%d deferred locally; throttle %v)",
			down, n, plainSent, thrSent, deferred.Load(), thr)
		if thrSent*2 > plainSent {
			t.Errorf("with the throttle %d requests were sent, want at most half of %d (no throttle)", thrSent, plainSent)
		}
		// Issue 26: the throttle's probes keep this protection (117 requests
		// before them, 307 with a burst of 20 probes in every window).
		if thrSent*10 > plainSent {
			t.Errorf("with the throttle %d requests were sent, want at most a tenth of %d (no throttle)", thrSent, plainSent)
		}
		var total int
		for _, st := range m.Status() {
			if st.State != subscriber.StatePending && st.State != subscriber.StateRetrying {
				t.Errorf("%v: state %v during the outage, want pending or retrying (never stopped)", st.Key, st.State)
			}
			if st.Deferred > 0 && st.DeferReason != nil && !errors.Is(st.DeferReason, rebound.ErrThrottled) {
				t.Errorf("%v: DeferReason %v", st.Key, st.DeferReason)
			}
			if !errors.Is(st.LastErr, errRejected) && st.Attempts > 0 {
				t.Errorf("%v: LastErr %v, want the registry's error", st.Key, st.LastErr)
			}
			total += st.Deferred
		}
		synctest.Wait() // hook queue drained
		if total == 0 || int64(total) != deferred.Load() {
			t.Errorf("Status.Deferred sums to %d, hooks saw %d; want equal and > 0", total, deferred.Load())
		}
		if got := telemetrytest.Collect(t, reader)["rebound.retry.attempts"]["component=subscriber,outcome=throttled"]; got != int64(total) {
			t.Errorf("rebound.retry.attempts{outcome=throttled} = %d, want %d (Status.Deferred)", got, total)
		}

		plainOK()
		thrOK()
		up := time.Now()
		tPlain := waitAllSubscribed(t, plain, n, time.Hour)
		waitAllSubscribed(t, m, n, time.Hour)
		t.Logf("all %d back after the outage: %v without throttle, %v with (requests in all: %d vs %d)",
			n, tPlain, time.Since(up), plainReg.Stats().Subscribes, thrReg.Stats().Subscribes)
		if c := m.Counts(); c.Stopped != 0 {
			t.Errorf("%d subscriptions stopped, want 0", c.Stopped)
		}
	})
}

// A retry budget bounds the retries of a Manager whose registry rejects
// everything to ratio x first attempts + the floor per window; refused
// retries are deferred (never a stop) and every subscription is back after
// the outage.
func TestBudgetBoundsRetriesDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n      = 200
			ratio  = 0.2
			minPS  = 1.0
			window = 10 * time.Second
			down   = 2 * time.Minute
		)
		plainReg, budReg := subscribertest.New(), subscribertest.New()
		plainOK, budOK := outage(plainReg), outage(budReg)
		b, err := rebound.NewRetryBudget(ratio, minPS, window)
		if err != nil {
			t.Fatal(err)
		}
		var budgetDeferred atomic.Int64
		plain := newManager(t, plainReg)
		m := newManager(t, budReg, subscriber.WithBudget(nil), subscriber.WithBudget(b),
			subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(subscriber.Hooks{Deferred: func(d subscriber.Deferral) {
				if errors.Is(d.Reason, rebound.ErrBudgetExhausted) {
					budgetDeferred.Add(1)
				}
			}})))
		subscribeN(t, plain, n)
		subscribeN(t, m, n)

		// Within the first window every deposit (the n first attempts) still
		// counts: retries <= ratio*n + minPS*window.
		time.Sleep(window - 500*time.Millisecond)
		synctest.Wait()
		first := float64(n)
		bound := ratio*first + minPS*window.Seconds()
		plainRetries := plainReg.Stats().Subscribes - n
		budRetries := budReg.Stats().Subscribes - n
		t.Logf("retries in the first %v: %d without budget, %d with (bound ratio*first+floor = %.0f)", window, plainRetries, budRetries, bound)
		if float64(budRetries) > bound {
			t.Errorf("%d retries in the first window, want <= %.0f", budRetries, bound)
		}
		if plainRetries <= budRetries*2 {
			t.Errorf("without a budget only %d retries (with: %d): the test does not exercise the budget", plainRetries, budRetries)
		}

		// Over the whole outage: the deposits expired, the floor remains.
		time.Sleep(down - window + 500*time.Millisecond)
		synctest.Wait()
		plainRetries = plainReg.Stats().Subscribes - n
		budRetries = budReg.Stats().Subscribes - n
		whole := ratio*first + minPS*(down+window).Seconds()
		t.Logf("retries over the %v outage: %d without budget, %d with (bound %.0f); %d retries deferred by the budget",
			down, plainRetries, budRetries, whole, budgetDeferred.Load())
		if float64(budRetries) > whole {
			t.Errorf("%d retries over the outage, want <= %.0f", budRetries, whole)
		}
		var deferred int
		for _, st := range m.Status() {
			if st.State != subscriber.StateRetrying {
				t.Errorf("%v: state %v, want retrying (a budget refusal never stops a subscription)", st.Key, st.State)
			}
			deferred += st.Deferred
		}
		if deferred == 0 {
			t.Error("no attempt deferred by the budget")
		}

		plainOK()
		budOK()
		waitAllSubscribed(t, plain, n, time.Hour)
		took := waitAllSubscribed(t, m, n, time.Hour)
		t.Logf("with the budget all %d were back %v after the outage (the floor paces the retries)", n, took)
		if c := m.Counts(); c.Stopped != 0 {
			t.Errorf("%d subscriptions stopped, want 0", c.Stopped)
		}
	})
}

// Confirmations after a registry restart go through the throttle too:
// subscribed subscriptions whose registry restarts and then rejects every
// request send fewer confirmations with a throttle, stay retrying (never
// stopped), and are all subscribed again once it accepts.
func TestThrottleDefersConfirmationsAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, down = 50, 5 * time.Minute
		plainReg, thrReg := subscribertest.New(), subscribertest.New()
		thr, err := rebound.NewAdaptiveThrottle(2, 30*time.Second, seeded(2))
		if err != nil {
			t.Fatal(err)
		}
		b, err := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		plain := newManager(t, plainReg)
		m := newManager(t, thrReg, subscriber.WithThrottle(thr), subscriber.WithBudget(b))
		subscribeN(t, plain, n)
		subscribeN(t, m, n)
		waitAllSubscribed(t, plain, n, time.Minute)
		waitAllSubscribed(t, m, n, time.Minute)

		// A healthy restart when the throttle's window holds no accept
		// (subscribed subscriptions send nothing): the confirmations are
		// first attempts, never throttled, so none is deferred.
		time.Sleep(time.Minute)
		plainReg.Restart()
		thrReg.Restart()
		up := time.Now()
		time.Sleep(time.Millisecond)
		tPlain := waitAllSubscribed(t, plain, n, time.Hour)
		waitAllSubscribed(t, m, n, time.Hour)
		var healthyDeferred int
		for _, st := range m.Status() {
			healthyDeferred += st.Deferred
		}
		t.Logf("healthy restart, throttle window empty: all %d confirmed in %v without throttle, %v with (%d deferred)",
			n, tPlain, time.Since(up), healthyDeferred)
		if healthyDeferred != 0 {
			t.Errorf("%d confirmations deferred after a healthy restart, want 0", healthyDeferred)
		}

		before := [2]int{plainReg.Stats().Subscribes, thrReg.Stats().Subscribes}
		plainOK, thrOK := outage(plainReg), outage(thrReg)
		plainReg.Restart()
		thrReg.Restart()
		time.Sleep(down)
		synctest.Wait()
		plainSent, thrSent := plainReg.Stats().Subscribes-before[0], thrReg.Stats().Subscribes-before[1]
		var deferred int
		for _, st := range m.Status() {
			if st.State != subscriber.StateRetrying {
				t.Errorf("%v: state %v, want retrying", st.Key, st.State)
			}
			deferred += st.Deferred
		}
		deferred -= healthyDeferred
		t.Logf("confirmations sent in a %v outage after a restart, %d subscriptions: %d without throttle, %d with (%d deferred)",
			down, n, plainSent, thrSent, deferred)
		if thrSent*2 > plainSent || deferred == 0 {
			t.Errorf("with the throttle %d requests (%d deferred), without %d: want at most half", thrSent, deferred, plainSent)
		}
		plainOK()
		thrOK()
		up = time.Now()
		tPlain = waitAllSubscribed(t, plain, n, time.Hour)
		waitAllSubscribed(t, m, n, time.Hour)
		t.Logf("all back after the registry accepted again: %v without throttle, %v with", tPlain, time.Since(up))
		if c := m.Counts(); c.Stopped != 0 {
			t.Errorf("%d stopped, want 0", c.Stopped)
		}
	})
}

// seeded returns a deterministic random source for a throttle's draws.
func seeded(s uint64) *rand.PCG { return rand.NewPCG(s, s^0x9e3779b97f4a7c15) }
