package subscriber_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

var watched = subscriber.Key{Service: "orders"}

func watchInst(port uint64) subscriber.Instance {
	return subscriber.Instance{ID: fmt.Sprint(port), IP: "10.0.0.1", Port: port, Weight: 1, Healthy: true, Enabled: true}
}

func newWatchManager(t *testing.T, reg *subscribertest.Registry) *subscriber.Manager {
	t.Helper()
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: 4 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// ports prints a snapshot's list.
func ports(s subscriber.Snapshot) string {
	if !s.HasList {
		return "(none)"
	}
	out := "["
	for i, in := range s.List {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(in.Port)
	}
	return out + "]"
}

// signalled reports whether v's change signal has a value waiting (and
// takes it).
func signalled(v *subscriber.View) bool {
	select {
	case <-v.Changed():
		return true
	default:
		return false
	}
}

// TestWatchShares: N Views of one key (from the Manager and from two
// groups) cost one registry subscription; every View shows the list.
func TestWatchShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m := newWatchManager(t, reg)
		g1, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		g2, _ := m.NewWatchGroup(time.Minute, 0)
		var views []*subscriber.View
		for i := range 30 {
			var v *subscriber.View
			var err error
			switch i % 3 {
			case 0:
				v, err = m.Watch(watched)
			case 1:
				v, err = g1.Watch(subscriber.Key{Service: "orders"})
			default:
				v, err = g2.Watch(watched)
			}
			if err != nil {
				t.Fatal(err)
			}
			views = append(views, v)
		}
		synctest.Wait()
		if s := reg.Stats(); s.Subscribes != 1 || s.Active != 1 {
			t.Fatalf("registry %+v with 30 views, want one subscription", s)
		}
		if n := len(m.Status()); n != 1 {
			t.Fatalf("%d Manager subscriptions, want 1", n)
		}
		for i, v := range views {
			if got := ports(v.Snapshot()); got != "[1]" || !signalled(v) {
				t.Fatalf("view %d: %s, want [1] signalled", i, got)
			}
		}
		if st := g1.Stats(); st.Keys != 1 || st.Views != 10 || st.Subscribes != 1 {
			t.Fatalf("group stats %+v", st)
		}
		for _, v := range views {
			_ = v.Close()
		}
		_ = g1.Close()
		_ = g2.Close()
	})
}

// TestWatchLastCloseUnsubscribes: the last Close ends the subscription
// (the registry's Unsubscribe is called) and leaves no goroutine; a Close
// that is not the last changes nothing; Close is idempotent.
func TestWatchLastCloseUnsubscribes(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		a, _ := m.Watch(watched)
		b, _ := m.Watch(watched)
		synctest.Wait()
		_ = a.Close()
		_ = a.Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 || s.Unsubscribes != 0 {
			t.Fatalf("registry %+v after one of two Closes, want still subscribed", s)
		}
		reg.Set(watched, watchInst(2))
		synctest.Wait()
		if got := ports(b.Snapshot()); got != "[2]" {
			t.Fatalf("remaining view %s, want [2]", got)
		}
		_ = b.Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 || s.Unsubscribes != 1 {
			t.Fatalf("registry %+v after the last Close, want unsubscribed", s)
		}
		if n := len(m.Status()); n != 1 || m.Status()[0].State != subscriber.StateStopped {
			t.Fatalf("Status %+v, want the one subscription stopped", m.Status())
		}
		// A new Watch starts a new subscription.
		c, _ := m.Watch(watched)
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 || s.Subscribes != 2 || ports(c.Snapshot()) != "[2]" {
			t.Fatalf("registry %+v, view %s after a new Watch", s, ports(c.Snapshot()))
		}
		_ = c.Close()
	})
}

// TestWatchLinger: a group's key outlives its last View by the linger; a
// View opened meanwhile gets the list at once without a registry request;
// Close of the group ends a lingering key at once.
func TestWatchLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m := newWatchManager(t, reg)
		g, _ := m.NewWatchGroup(10*time.Second, 0)
		v, _ := g.Watch(watched)
		synctest.Wait()
		_ = v.Close()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		v2, _ := g.Watch(watched)
		if got := ports(v2.Snapshot()); got != "[1]" || !signalled(v2) {
			t.Fatalf("view during the linger: %s, want [1] signalled", got)
		}
		_ = v2.Close()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 || s.Subscribes != 1 {
			t.Fatalf("registry %+v before the linger ends", s)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 || s.Unsubscribes != 1 {
			t.Fatalf("registry %+v after the linger, want unsubscribed", s)
		}
		if st := g.Stats(); st.Keys != 0 || st.Subscribes != 1 || st.Unsubscribes != 1 {
			t.Fatalf("group %+v", st)
		}
		v3, _ := g.Watch(watched)
		_ = v3.Close() // lingers
		synctest.Wait()
		_ = g.Close() // ends it at once, and waits for the unsubscription
		if s := reg.Stats(); s.Active != 0 || s.Unsubscribes != 2 {
			t.Fatalf("registry %+v after the group's Close", s)
		}
		if _, err := g.Watch(watched); !errors.Is(err, rebound.ErrClosed) || errors.Is(err, subscriber.ErrManagerClosed) || !strings.Contains(err.Error(), "watch group closed") {
			t.Fatalf("Watch after the group's Close: %v", err)
		}
	})
}

// TestWatchCoalesces: a reader that does not read while ten lists arrive
// finds one signal and the latest list, never a backlog.
func TestWatchCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m := newWatchManager(t, reg)
		v, _ := m.Watch(watched)
		defer v.Close()
		synctest.Wait()
		<-v.Changed()
		first := v.Snapshot()
		for p := uint64(2); p <= 11; p++ {
			reg.Set(watched, watchInst(p))
			synctest.Wait()
		}
		if !signalled(v) {
			t.Fatal("no signal after ten changes")
		}
		if signalled(v) {
			t.Fatal("a second signal waiting: changes did not coalesce")
		}
		s := v.Snapshot()
		if got := ports(s); got != "[11]" || s.Version != first.Version+10 {
			t.Fatalf("after ten changes: %s version %d (first %d), want [11] and ten versions later", got, s.Version, first.Version)
		}
	})
}

// TestWatchUnresolvedAndStopped: with the registry down at Watch, the view
// shows the registry's error as soon as the attempt fails (pushed, not
// polled), clears it with the first list; a Manager Close is pushed as a
// stop that keeps the last list.
func TestWatchUnresolvedAndStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		reg.SetDown(true)
		m := newWatchManager(t, reg)
		synctest.Wait()
		v, _ := m.Watch(watched)
		defer v.Close()
		synctest.Wait()
		s := v.Snapshot()
		if !signalled(v) || s.HasList || !errors.Is(s.Unresolved, subscribertest.ErrUnavailable) {
			t.Fatalf("registry down: %+v, want unresolved with ErrUnavailable, signalled", s)
		}
		// Retries failing with the same error are no change.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if signalled(v) {
			t.Fatalf("signalled again for the same error: %+v", v.Snapshot())
		}
		reg.SetDown(false)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		s = v.Snapshot()
		if !signalled(v) || ports(s) != "[1]" || s.Unresolved != nil {
			t.Fatalf("registry back: %+v, want [1] resolved", s)
		}
		// A lost connection does not make a view with a list unresolved.
		reg.SetDown(true)
		synctest.Wait()
		if s := v.Snapshot(); s.Unresolved != nil || ports(s) != "[1]" {
			t.Fatalf("connection lost with a list: %+v", s)
		}
		_ = m.Close()
		synctest.Wait()
		s = v.Snapshot()
		if !signalled(v) || !errors.Is(s.Stopped, subscriber.ErrManagerClosed) || ports(s) != "[1]" {
			t.Fatalf("after Close: %+v, want stopped with ErrManagerClosed and the last list", s)
		}
		if _, err := m.Watch(watched); !errors.Is(err, subscriber.ErrManagerClosed) {
			t.Fatalf("Watch after Close: %v", err)
		}
	})
}

// TestWatchPermanentStop: a permanent registry error is pushed as a stop;
// a later Watch of the key (also in a group that held it) starts again.
func TestWatchPermanentStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		bad := errors.New("no such namespace")
		reg.SetFailure(func(subscriber.Key) error { return rebound.Permanent(bad) })
		m := newWatchManager(t, reg)
		g, _ := m.NewWatchGroup(0, 0)
		v, _ := g.Watch(watched)
		defer v.Close()
		synctest.Wait()
		s := v.Snapshot()
		if !signalled(v) || !errors.Is(s.Stopped, bad) || s.Unresolved != nil {
			t.Fatalf("permanent error: %+v, want stopped with it (and not unresolved)", s)
		}
		reg.SetFailure(nil)
		reg.Set(watched, watchInst(7))
		v2, err := g.Watch(watched)
		if err != nil {
			t.Fatal(err)
		}
		defer v2.Close()
		synctest.Wait()
		if got := ports(v2.Snapshot()); got != "[7]" || v2.Snapshot().Stopped != nil {
			t.Fatalf("Watch after the stop: %s %+v, want a new subscription's list", got, v2.Snapshot())
		}
		if st := g.Stats(); st.Subscribes != 2 {
			t.Fatalf("group %+v, want two subscribes", st)
		}
	})
}

// TestWatchRefreshPaced: Refresh calls of every View of a group's key are
// coalesced to one re-confirmation per interval, the trailing one served
// at the interval's end.
func TestWatchRefreshPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m := newWatchManager(t, reg)
		g, _ := m.NewWatchGroup(0, 6*time.Second)
		defer g.Close()
		a, _ := g.Watch(watched)
		b, _ := g.Watch(watched)
		defer a.Close()
		defer b.Close()
		synctest.Wait()
		reads := func() int { s := reg.Stats(); return s.Subscribes + s.Lookups } // a Refresh is a Lookup here
		before := reads()
		a.Refresh()
		synctest.Wait()
		lead := reads()
		time.Sleep(3 * time.Second)
		for range 50 {
			a.Refresh()
			b.Refresh()
		}
		synctest.Wait()
		if n := reads(); n != lead {
			t.Fatalf("coalesced refreshes reached the registry at once: %d -> %d", lead, n)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if n := reads(); lead != before+1 || n != lead+1 {
			t.Fatalf("registry subscribes %d -> %d -> %d, want one at the first Refresh and one at the interval's end", before, lead, n)
		}
		if st := g.Stats(); st.Refreshes != 2 {
			t.Fatalf("group %+v, want 2 refreshes", st)
		}
	})
}

// TestWatchConcurrent: Watch and Close of one key from many goroutines
// (run it with -race) leave no subscription and no goroutine behind.
func TestWatchConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		g, _ := m.NewWatchGroup(time.Second, 0)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for j := range 20 {
					var v *subscriber.View
					var err error
					if (i+j)%2 == 0 {
						v, err = m.Watch(watched)
					} else {
						v, err = g.Watch(watched)
					}
					if err != nil {
						t.Error(err)
						return
					}
					v.Refresh()
					_ = v.Snapshot()
					if j%3 == 0 {
						time.Sleep(time.Duration(i*100) * time.Millisecond) // fake time: some lingers end
					}
					_ = v.Close()
				}
			})
		}
		wg.Wait()
		_ = g.Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 || s.Subscribes < 1 {
			t.Fatalf("registry %+v after every Close, want nothing subscribed", s)
		}
		for _, st := range m.Status() {
			if st.State != subscriber.StateStopped {
				t.Fatalf("subscription %+v still running", st)
			}
		}
	})
}

// TestWatchBadInput: a bad key and bad group options are *ArgumentErrors
// naming the argument.
func TestWatchBadInput(t *testing.T) {
	m := newWatchManager(t, subscribertest.New())
	for _, k := range []subscriber.Key{{}, {Service: "  "}, {Service: "a", Clusters: []string{"x", ""}}} {
		_, err := m.Watch(k)
		var ae *rebound.ArgumentError
		if !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Func != "subscriber.WatchGroup.Watch" {
			t.Errorf("Watch(%#v): %v, want an ArgumentError of subscriber.WatchGroup.Watch", k, err)
		}
	}
	g, _ := m.NewWatchGroup(0, 0)
	if _, err := g.Watch(subscriber.Key{}); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("group Watch of an empty key: %v", err)
	}
	for _, arg := range []string{"linger", "refresh"} {
		linger, refresh := time.Duration(0), time.Duration(0)
		if arg == "linger" {
			linger = -1
		} else {
			refresh = -1
		}
		var ae *rebound.ArgumentError
		if _, err := m.NewWatchGroup(linger, refresh); !errors.As(err, &ae) || ae.Arg != arg {
			t.Errorf("NewWatchGroup with a negative %s: %v", arg, err)
		}
	}
	if _, err := m.NewWatchGroup(0, 0); err != nil {
		t.Errorf("NewWatchGroup(0, 0): %v", err)
	}
	_ = m.Close()
	if _, err := m.NewWatchGroup(0, 0); !errors.Is(err, subscriber.ErrManagerClosed) {
		t.Errorf("NewWatchGroup after Close: %v", err)
	}
}

// TestSnapshotNewList: a reader that remembers only the version it read
// tells a new list from a stop that keeps the list.
func TestSnapshotNewList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(watched, watchInst(1))
		m := newWatchManager(t, reg)
		v, _ := m.Watch(watched)
		defer v.Close()
		synctest.Wait()
		s1 := v.Snapshot()
		if !s1.NewList(0) || s1.NewList(s1.Version) {
			t.Fatalf("first list %+v: NewList(0) %v, NewList(own version) %v", s1, s1.NewList(0), s1.NewList(s1.Version))
		}
		reg.Set(watched, watchInst(2))
		synctest.Wait()
		s2 := v.Snapshot()
		if !s2.NewList(s1.Version) || s2.NewList(s2.Version) {
			t.Fatalf("second list %+v: NewList(%d) %v, want true", s2, s1.Version, s2.NewList(s1.Version))
		}
		_ = m.Close()
		synctest.Wait()
		s3 := v.Snapshot()
		if s3.Stopped == nil || s3.NewList(s2.Version) || !s3.NewList(s1.Version) {
			t.Fatalf("stop after a read list %+v: NewList(%d) %v, want false; NewList(%d) %v, want true",
				s3, s2.Version, s3.NewList(s2.Version), s1.Version, s3.NewList(s1.Version))
		}
	})
}
