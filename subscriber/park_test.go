package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// An outage the monitor reports costs O(1): while the connection is down,
// pending subscriptions and subscribed ones that lost it send nothing and
// hold no timer after their first attempt; on Connected every one is
// confirmed through the limiter, as for any reconnect. (Before: these 200
// subscriptions sent 8,323 requests in 10 minutes of outage, 4,324 with
// redo, and kept a timer each.)
func TestOutageParksRetries(t *testing.T) {
	for _, redo := range []bool{false, true} {
		t.Run(fmt.Sprint("redo=", redo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, limit, burst = 100, 20, 5
				reg := subscribertest.New()
				if redo {
					reg.EnableRedo(nil)
				}
				m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
				up := subscribeN(t, m, n) // subscribed, then they lose the connection
				for _, s := range up {
					<-s.Ready()
				}
				reg.SetDown(true)
				synctest.Wait()
				pending := make([]*subscriber.Subscription, n) // created during the outage
				for i := range pending {
					pending[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("new", i)}, func([]subscriber.Instance) {})
				}
				synctest.Wait()
				sent := reg.Stats().Subscribes
				if want := 2 * n; sent != want {
					t.Fatalf("%d requests before the outage's first minute, want %d (the first attempts)", sent, want)
				}
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				if got := reg.Stats().Subscribes - sent; got != 0 {
					t.Errorf("%d requests in 10 minutes with the connection reported down, want 0", got)
				}
				if c := m.Counts(); c.Scheduled != 0 {
					t.Errorf("%d scheduler entries while down, want 0", c.Scheduled)
				}
				for _, st := range m.Status() {
					if st.State != subscriber.StateRetrying {
						t.Errorf("%v: %v during the outage, want retrying", st.Key, st.State)
					}
				}

				var mu sync.Mutex
				var at []time.Time
				reg.OnSubscribe(func(subscriber.Key) {
					mu.Lock()
					at = append(at, time.Now())
					mu.Unlock()
				})
				back := time.Now()
				reg.SetDown(false)
				for _, s := range append(up, pending...) {
					<-s.Ready()
				}
				if d, max := time.Since(back), time.Duration(2*n/limit+1)*time.Second; d > max {
					t.Errorf("every subscription confirmed %v after the connection came back, want <= %v", d, max)
				}
				synctest.Wait()
				mu.Lock()
				checkRate(t, at, limit, burst)
				mu.Unlock()
			})
		})
	}
}

// A retry timer set before the Disconnected report is parked by it.
func TestDisconnectedParksRetryTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetFailure(func(k subscriber.Key) error {
			if k.Service == orders.Service {
				return subscribertest.ErrUnavailable
			}
			return nil
		})
		m := newManager(t, reg, subscriber.WithLimiter(nil))
		<-mustSubscribe(t, m, subscriber.Key{Service: "up"}, func([]subscriber.Instance) {}).Ready()
		mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		synctest.Wait() // the first attempt failed: a retry timer is set
		if c := m.Counts(); c.Scheduled != 1 {
			t.Fatalf("%d scheduler entries, want the retry timer", c.Scheduled)
		}
		reg.SetDown(true)
		synctest.Wait()
		sent := reg.Stats().Subscribes
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := reg.Stats().Subscribes - sent; got != 0 {
			t.Errorf("%d requests in an hour with the connection reported down, want 0", got)
		}
	})
}

// stoppingMonitor reports Connected and Disconnected, then its MonitorConnection
// returns (err) when stop is closed: nothing will report Connected.
// errRegistryClosed is a closed registry client's error.
var errRegistryClosed = fmt.Errorf("registry: closed: %w", rebound.ErrClosed)

type stoppingMonitor struct {
	*subscribertest.Registry
	stop chan struct{}
	err  error
}

func (r stoppingMonitor) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	report(true) // up once
	report(false)
	select {
	case <-r.stop:
		return r.err
	case <-ctx.Done():
		return nil
	}
}

// A monitor that returns while the connection is down leaves no
// subscription parked for ever: they retry on their own timers again (or
// stop, when it returned a closed error).
func TestParkedWhenMonitorStops(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{{"nil", nil}, {"error", errors.New("monitor broke")}, {"closed", errRegistryClosed}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := subscribertest.New()
				reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
				mon := stoppingMonitor{reg, make(chan struct{}), c.err}
				m := newManager(t, mon, subscriber.WithLimiter(nil))
				synctest.Wait()
				s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := reg.Stats().Subscribes; got != 1 {
					t.Fatalf("%d requests while the connection is reported down, want the first attempt", got)
				}
				close(mon.stop)
				synctest.Wait()
				if c.err == errRegistryClosed {
					if err := s.Err(); !errors.Is(err, errRegistryClosed) {
						t.Fatalf("stopped with %v, want the registry's closed error", err)
					}
					return
				}
				reg.SetFailure(nil)
				time.Sleep(time.Minute)
				synctest.Wait()
				select {
				case <-s.Ready():
				default:
					t.Fatalf("a minute after the monitor stopped: %+v, want subscribed", s.Status())
				}
			})
		})
	}
}

// A registry down since the Manager started does not park: the
// subscriptions retry on their backoff (the contract of subscribertest's
// DownAtStart), until the connection has been seen up.
func TestDownAtStartRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetDown(true)
		m := newManager(t, reg, subscriber.WithLimiter(nil))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := s.Status().TotalAttempts; n < 3 {
			t.Fatalf("%d attempts in a minute against a registry down since the start, want retries", n)
		}
		reg.SetDown(false)
		synctest.Wait()
		<-s.Ready()
		reg.SetDown(true) // up once: now the outage parks
		synctest.Wait()
		sent := reg.Stats().Subscribes
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := reg.Stats().Subscribes - sent; got != 0 {
			t.Errorf("%d requests in an hour of a later outage, want 0", got)
		}
	})
}
