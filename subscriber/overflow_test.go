package subscriber_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A reconciliation period of centuries means "about never": the jittered
// delay (0.75 to 1.25 x period) saturates instead of overflowing to a
// negative delay, which made a Lookup due on every scheduler tick.
func TestReconcileHugePeriodDoesNotSpin(t *testing.T) {
	for _, p := range []time.Duration{100 * 365 * 24 * time.Hour, math.MaxInt64} {
		synctest.Test(t, func(t *testing.T) {
			reg := subscribertest.New()
			reg.Set(orders, inst("10.0.0.1"))
			m := newManager(t, reg, subscriber.WithReconcile(p))
			s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
			<-s.Ready()
			synctest.Wait()
			before := reg.Stats().Lookups
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := reg.Stats().Lookups - before; got != 0 {
				t.Fatalf("WithReconcile(%v): %d Lookups in a minute, want 0", p, got)
			}
		})
	}
}

// A confirmation cap of centuries is not reached in a minute: the due
// time saturates; it overflowed UnixNano and the Manager confirmed the
// subscription itself at once.
func TestConfirmTimeoutOfCenturies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.EnableRedo(func(subscriber.Key) subscribertest.RedoOutcome { return subscribertest.RedoSilent })
		m := newManager(t, reg, subscriber.WithConfirmTimeout(math.MaxInt64))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		synctest.Wait()
		reg.Restart()
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateRetrying || reg.Subscribed(orders) != 0 {
			t.Fatalf("a minute after the restart: state %v, registry holds %d; want retrying (awaiting the adapter's evidence), 0", st.State, reg.Subscribed(orders))
		}
	})
}
