package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBreakerUntilWithProbeInFlight: every target out, one open for an
// hour and one half-open with its probe in flight. The probe may close its
// breaker at any moment, so the Until a caller (failback) waits for must
// be the probe recheck, not the end of the hour.
func TestBreakerUntilWithProbeInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(2)
		ps[0].failing.Store(true)
		ps[1].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithMaxEjected(1),
			WithBreakerSettings(func(target string) gobreaker.Settings {
				if target == "a" {
					return gobreaker.Settings{Timeout: time.Hour}
				}
				return gobreaker.Settings{Timeout: time.Second}
			}))
		callTarget(t, d, "a", 1)
		callTarget(t, d, "b", 1)
		time.Sleep(2 * time.Second) // b half-open, a open for an hour
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil || len(ivs) != 1 || ivs[0].Target() != "b" {
			t.Fatalf("b half-open: %v, %v", targets(ivs), err)
		}
		ps[1].failing.Store(false)
		ps[1].block = make(chan struct{})
		release := sync.OnceFunc(func() { close(ps[1].block) })
		defer release()
		done := make(chan error, 1)
		go func() { _, err := ivs[0].Invoke(context.Background(), &Invocation{}); done <- err }()
		synctest.Wait() // the probe is in flight
		_, err = d.List(context.Background(), &Invocation{})
		var boe *BreakerOpenError
		if !errors.As(err, &boe) {
			t.Fatalf("List during the probe: %v, want a *BreakerOpenError", err)
		}
		if wait := time.Until(boe.Until); wait > time.Minute {
			t.Errorf("with a probe in flight, List says wait %v (a's hour), want the probe recheck", wait)
		}
		release()
		<-done
	})
}
