package subscriber_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A group's default refresh interval (the Manager's plus one second)
// saturates: with a huge Manager interval, Refresh calls are paced, not
// each counted as a re-confirmation (the sum overflowed to a negative
// interval).
func TestWatchGroupDefaultIntervalSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m, err := subscriber.New(reg, subscriber.WithRefreshInterval(math.MaxInt64))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		g, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		v, _ := g.Watch(watched)
		defer v.Close()
		synctest.Wait()
		for range 5 {
			v.Refresh()
			synctest.Wait()
			time.Sleep(time.Second)
		}
		if st := g.Stats(); st.Refreshes != 1 {
			t.Fatalf("5 Refresh calls 1 s apart with a huge interval: %d re-confirmations, want 1", st.Refreshes)
		}
	})
}

// View.Refresh of a Manager.Watch View is paced as documented: the first
// call at once, the calls within the interval by one re-confirmation at
// its end (they were dropped: a change the caller asked to see was
// confirmed only by the next call after the interval, if any).
func TestManagerWatchRefreshPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m, err := subscriber.New(reg, subscriber.WithRefreshInterval(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		v, _ := m.Watch(watched)
		defer v.Close()
		synctest.Wait()
		reads := func() int { s := reg.Stats(); return s.Subscribes + s.Lookups }
		before := reads()
		v.Refresh()
		synctest.Wait()
		first := reads()
		time.Sleep(time.Second)
		for range 5 {
			v.Refresh()
		}
		synctest.Wait()
		if n := reads(); first != before+1 || n != first {
			t.Fatalf("registry reads %d -> %d -> %d; want one at the first Refresh, none for the calls within the interval", before, first, n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := reads(); n != first+1 {
			t.Fatalf("registry reads %d after the interval, want %d (one trailing re-confirmation for the calls within it)", n, first+1)
		}
	})
}
