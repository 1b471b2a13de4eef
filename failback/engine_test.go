package failback

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// WithPolicy is the door for the engine's options: a bad one names
// failback.WithPolicy, and an observer given there sees the invoker's
// events only, in order (not the engine's per-attempt events).
func TestWithPolicyEngineOptions(t *testing.T) {
	for name, o := range map[string]rebound.Option{
		"budget":   rebound.WithBudget(nil),
		"throttle": rebound.WithThrottle(nil),
		"attempts": rebound.WithMaxAttempts(-1),
	} {
		_, err := New(cluster.NewStaticDirectory(newProvider("a:1", nil)), WithPolicy(DefaultPolicy(), o))
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Func != "failback.WithPolicy" || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("%s: New = %v, want an *rebound.ArgumentError naming failback.WithPolicy", name, err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		var kinds []rebound.EventKind
		obs := rebound.ObserverFunc(func(e rebound.Event) {
			if _, ok := e.Detail.(Task); !ok {
				t.Errorf("event %v: Detail %T, want a Task", e.Kind, e.Detail)
			}
			kinds = append(kinds, e.Kind)
		})
		th, err := rebound.NewAdaptiveThrottle(2, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))),
			WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter},
				rebound.WithMaxAttempts(3), rebound.WithThrottle(th), rebound.WithObserver(obs)))
		if _, err := f.Invoke(callerCtx(), &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []rebound.EventKind{rebound.EventQueued, rebound.EventRetry, rebound.EventGiveUp}
		if len(kinds) != len(want) {
			t.Fatalf("events %v, want %v", kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Fatalf("events %v, want %v", kinds, want)
			}
		}
		f.Close()
	})
}
