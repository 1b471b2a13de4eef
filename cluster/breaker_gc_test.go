package cluster

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBreakerWindowTimerDoesNotPinDirectory: a BreakerDirectory dropped
// while a breaker's window timer is armed (a closed Interval of an hour)
// is garbage: the timer must not keep it, its breakers and the inner
// directory alive until it fires.
func TestBreakerWindowTimerDoesNotPinDirectory(t *testing.T) {
	collected := make(chan struct{})
	func() {
		d, err := NewBreakerDirectory(static(providers(2)), WithBreakerSettings(func(string) gobreaker.Settings {
			return gobreaker.Settings{Interval: time.Hour}
		}))
		if err != nil {
			t.Fatal(err)
		}
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil {
			t.Fatal(err)
		}
		for _, iv := range ivs {
			if _, err := iv.Invoke(context.Background(), &Invocation{}); err != nil {
				t.Fatal(err)
			}
		}
		runtime.AddCleanup(d, func(ch chan struct{}) { close(ch) }, collected)
	}()
	runtime.GC()
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(10 * time.Second):
		t.Fatal("a dropped BreakerDirectory was not collected: its breakers' window timers (Interval 1h) keep it alive until they fire")
	}
}
