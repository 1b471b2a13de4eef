package subscribertest

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails tb (Fatalf,
// naming what it waited for) once d has passed. It is for tests over real
// sockets and real clocks (a registry's client, a browser), whose
// goroutines cannot run under testing/synctest; tests that only wait on
// timers should use synctest instead.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}
