package subscriber_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A registry closed while the connection is down (no Subscribe is sent
// then, so none can return its closed error) stops every subscription
// with that reason: MonitorConnection's closed error is the signal.
func TestRegistryClosedWhileDownStopsSubscriptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.EnableRedo(nil) // confirms reconnects: nothing is sent while down
		m := newManager(t, reg)
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		reg.SetDown(true)
		synctest.Wait()
		reg.Close()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-s.Done():
		default:
			st := s.Status()
			t.Fatalf("a minute after the registry closed: state %v, last error %v; want stopped", st.State, st.LastErr)
		}
		if err := s.Err(); !errors.Is(err, rebound.ErrClosed) || errors.Is(err, subscriber.ErrManagerClosed) || errors.Is(err, subscriber.ErrUnsubscribed) {
			t.Fatalf("stopped with %v, want the registry's closed error", err)
		}
	})
}
