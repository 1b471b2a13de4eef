package cluster

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestBreakerPanickingClassifierProbe: a classifier (WithBreakerClassifier)
// that panics on a half-open probe's outcome must not leave the probe
// taken forever: the probe counts as a failure (as a panicking call does),
// so the breaker opens again and, after its timeout, admits a new probe.
func TestBreakerPanickingClassifierProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(3)
		ps[0].failing.Store(true)
		var boom atomic.Bool
		classify := func(err error) bool {
			if boom.Load() {
				panic("classifier bug")
			}
			return defaultFailure(err)
		}
		d, _ := NewBreakerDirectory(static(ps), WithOpenTimeout(time.Second), WithConsecutiveFailures(1),
			WithBreakerClassifier(classify))
		callTarget(t, d, "a", 1)
		time.Sleep(2 * time.Second) // half-open
		boom.Store(true)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the classifier's panic did not reach the caller")
				}
			}()
			callTarget(t, d, "a", 1)
		}()
		boom.Store(false)
		ps[0].failing.Store(false)
		time.Sleep(2 * time.Second) // past an open timeout of the failed probe
		callTarget(t, d, "a", 1)
		if got := strings.Join(listed(t, d), ","); got != "a,b,c" {
			t.Fatalf("after the panicking probe and a good one listed %q, want a,b,c (the probe stays taken)", got)
		}
	})
}
