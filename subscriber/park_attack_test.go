package subscriber_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// scriptMonitor reports what the test sends on ch, duplicates and all.
type scriptMonitor struct {
	*subscribertest.Registry
	ch chan bool
}

func (r scriptMonitor) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	for {
		select {
		case st := <-r.ch:
			report(st)
		case <-ctx.Done():
			return nil
		}
	}
}

// A monitor that flaps (duplicates, Connected twice, Disconnected twice)
// and ends on Disconnected leaves every subscription parked: nothing is
// sent for an hour; the one Connected that follows confirms them all
// through the limiter.
func TestParkFlappingMonitor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit, burst = 40, 20, 5
		reg := subscribertest.New()
		mon := scriptMonitor{reg, make(chan bool)}
		m := newManager(t, mon, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
		mon.ch <- true
		subs := subscribeN(t, m, n)
		for _, s := range subs {
			<-s.Ready()
		}
		reg.SetDown(true) // Subscribe fails; the monitor says what the script says
		D, C := false, true
		for _, st := range []bool{D, C, D, D, C, C, D, C, D, D} {
			mon.ch <- st
		}
		time.Sleep(time.Minute) // what was admitted before the last report ends
		synctest.Wait()
		sent := reg.Stats().Subscribes
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := reg.Stats().Subscribes - sent; got != 0 {
			t.Errorf("%d requests in an hour after a flapping monitor's last Disconnected, want 0", got)
		}
		if c := m.Counts(); c.Scheduled != 0 {
			t.Errorf("%d scheduler entries while parked, want 0", c.Scheduled)
		}
		var mu sync.Mutex
		var at []time.Time
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
		reg.SetDown(false)
		mon.ch <- C
		waitAllSubscribed(t, m, n, time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if len(at) < n {
			t.Errorf("%d requests after Connected, want one per subscription (%d)", len(at), n)
		}
		checkRate(t, at, limit, burst)
	})
}

// While parked: Refresh, Unsubscribe and Close all return, and
// nothing is left running (goleak in TestMain).
func TestParkedCallsReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		mon := scriptMonitor{reg, make(chan bool)}
		m, err := subscriber.New(mon, subscriber.WithLimiter(nil))
		if err != nil {
			t.Fatal(err)
		}
		mon.ch <- true
		subs := subscribeN(t, m, 4)
		for _, s := range subs {
			<-s.Ready()
		}
		reg.SetDown(true)
		mon.ch <- false
		pending := mustSubscribe(t, m, subscriber.Key{Service: "never"}, func([]subscriber.Instance) {})
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := subs[0].Status(); st.State != subscriber.StateRetrying {
			t.Fatalf("%+v, want retrying while parked", st)
		}
		subs[0].Refresh()
		synctest.Wait()
		if err := subs[1].Unsubscribe(); err != nil {
			t.Errorf("Unsubscribe while parked: %v", err)
		}
		<-subs[1].Done()
		if err := m.Close(); err != nil {
			t.Errorf("Close while parked: %v", err)
		}
		for i, s := range append(subs, pending) {
			select {
			case <-s.Done():
			default:
				t.Errorf("subscription %d not done after Close", i)
			}
		}
	})
}

// Ready and Done asked for from many goroutines, before, during and after
// the event: every caller gets a channel that is closed by the event, and
// callers before it share one channel.
func TestReadyDoneConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		m := newManager(t, reg, subscriber.WithLimiter(nil))
		for i := range 20 {
			s := mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("s", i)}, func([]subscriber.Instance) {})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					select { // Ready stays open if Unsubscribe comes first
					case <-s.Ready():
					case <-s.Done():
					}
				})
				wg.Go(func() { <-s.Done() })
			}
			if i%2 == 0 {
				<-s.Ready()
			}
			wg.Go(func() { _ = s.Unsubscribe() })
			wg.Wait()
			if !isClosed(s.Ready()) && i%2 == 0 {
				t.Errorf("%d: Ready not closed after the acknowledgement", i)
			}
			if !isClosed(s.Done()) {
				t.Errorf("%d: Done not closed after Unsubscribe", i)
			}
		}
	})
}

// panickingMonitor reports Connected, then Disconnected, then panics when
// boom is closed: nothing will report Connected.
type panickingMonitor struct {
	*subscribertest.Registry
	boom chan struct{}
}

func (r panickingMonitor) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	report(true)
	report(false)
	select {
	case <-r.boom:
		panic("monitor bug")
	case <-ctx.Done():
		return nil
	}
}

// A monitor that panics while the connection is reported down leaves no
// subscription parked: they retry on their own timers and subscribe once
// the registry answers.
func TestParkedWhenMonitorPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.SetFailure(func(subscriber.Key) error { return subscribertest.ErrUnavailable })
		mon := panickingMonitor{reg, make(chan struct{})}
		m := newManager(t, mon, subscriber.WithLimiter(nil))
		synctest.Wait()
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := reg.Stats().Subscribes; got != 1 {
			t.Fatalf("%d requests while parked, want the first attempt", got)
		}
		close(mon.boom)
		synctest.Wait()
		reg.SetFailure(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !isClosed(s.Ready()) {
			t.Fatalf("a minute after the monitor panicked: %+v, want subscribed", s.Status())
		}
	})
}

// Reports racing with Subscribe and Unsubscribe: nothing panics or races,
// every Unsubscribe returns, and the survivors are subscribed once the
// last report is Connected.
func TestParkReportsRaceSubscribeUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		mon := scriptMonitor{reg, make(chan bool)}
		m := newManager(t, mon, subscriber.WithLimiter(rate.NewLimiter(50, 10)))
		mon.ch <- true
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range 30 {
				reg.SetDown(i%2 == 0)
				mon.ch <- []bool{false, true}[i%2]
				time.Sleep(time.Duration(i%3) * 100 * time.Millisecond)
			}
			reg.SetDown(false)
			mon.ch <- true
		})
		var keep []*subscriber.Subscription
		var mu sync.Mutex
		for g := range 4 {
			wg.Go(func() {
				for i := range 10 {
					s := mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("g", g, "-", i)}, func([]subscriber.Instance) {})
					if i%2 == 0 {
						if err := s.Unsubscribe(); err != nil {
							t.Errorf("Unsubscribe: %v", err)
						}
						continue
					}
					mu.Lock()
					keep = append(keep, s)
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		waitAllSubscribed(t, m, len(keep), 5*time.Minute)
	})
}
