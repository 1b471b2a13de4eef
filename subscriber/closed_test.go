package subscriber_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A registry closed while the connection is down (no Subscribe is sent
// then, so none can return ErrRegistryClosed) stops every subscription
// with that reason: MonitorConnection's ErrRegistryClosed is the signal.
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
		if err := s.Err(); !errors.Is(err, subscriber.ErrRegistryClosed) {
			t.Fatalf("stopped with %v, want ErrRegistryClosed", err)
		}
	})
}
