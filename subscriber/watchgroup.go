package subscriber

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rebound-go/rebound/internal/sat"
)

// WatchGroup is the Views of one component built over a Manager: a gRPC
// resolver Builder, a kratos Discovery. It lingers keys, paces refreshes and
// ends all at once with Close. It is safe for concurrent use.
type WatchGroup struct {
	m          *Manager
	linger     time.Duration
	rnInterval time.Duration

	wg sync.WaitGroup // linger and refresh timers whose callback may run

	mu     sync.Mutex
	closed bool
	keys   map[string]*groupKey
	ending []*watch // watches the group let go of last, whose end Close waits for

	subscribes, unsubscribes, refreshes atomic.Uint64
}

// groupKey is a group's share of one watch.
type groupKey struct {
	w            *watch
	views        int
	linger       *time.Timer
	lastRefresh  time.Time
	refreshTimer *time.Timer
}

// WatchGroupStats counts what a WatchGroup did.
type WatchGroupStats struct {
	Keys, Views              int    // held now: keys (open or lingering), open Views
	Subscribes, Unsubscribes uint64 // the times the group took and let go of a key
	Refreshes                uint64 // the re-confirmations View.Refresh led to
}

// NewWatchGroup returns an empty group of Views over m. linger keeps a key's
// subscription that long after its last View closed (0: none). refresh paces
// View.Refresh per key (0: 6 s, the Manager's 5 s pace plus one). A negative
// duration is an *rebound.ArgumentError; after Close the error matches
// rebound.ErrClosed.
func (m *Manager) NewWatchGroup(linger, refresh time.Duration) (*WatchGroup, error) {
	const fn = "subscriber.Manager.NewWatchGroup"
	if linger < 0 {
		return nil, argError(fn, "linger", "must not be negative (0 releases at once)")
	}
	if refresh < 0 {
		return nil, argError(fn, "refresh", "must not be negative (0: the default)")
	}
	if m.closedNow() {
		return nil, fmt.Errorf("subscriber: NewWatchGroup: %w", errManagerClosed)
	}
	g := m.newWatchGroup()
	g.linger = linger
	if refresh > 0 {
		g.rnInterval = refresh
	}
	return g, nil
}

// newWatchGroup returns a group with the default settings: no linger,
// refreshes paced at the Manager's refresh interval plus one second
// (saturated: a huge interval does not wrap to a negative one).
func (m *Manager) newWatchGroup() *WatchGroup {
	return &WatchGroup{m: m, rnInterval: sat.Add(m.opts.refreshMin, time.Second), keys: make(map[string]*groupKey)}
}

// Watch returns a View of key's list, shared with every other View of key.
// The first View of a key starts one subscription (Manager.Subscribe); the
// last Close ends it. An invalid key is an *rebound.ArgumentError; after
// Close, the group's or the Manager's, the error matches rebound.ErrClosed.
func (g *WatchGroup) Watch(key Key) (*View, error) {
	const fn = "subscriber.WatchGroup.Watch"
	if strings.TrimSpace(key.Service) == "" {
		return nil, argError(fn, "key.Service", "is empty or only white space")
	}
	for i, c := range key.Clusters {
		if strings.TrimSpace(c) == "" {
			return nil, argError(fn, fmt.Sprintf("key.Clusters[%d]", i), "is empty or only white space")
		}
	}
	if g.m.closedNow() {
		return nil, fmt.Errorf("subscriber: %s %s: %w", fn, key, errManagerClosed)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errGroupClosed
	}
	id := key.String()
	gk := g.keys[id]
	if gk != nil {
		g.m.watches.mu.Lock()
		gone := gk.w.gone
		g.m.watches.mu.Unlock()
		if gone { // stopped for good: start again
			g.dropLocked(id, gk)
			gk = nil
		}
	}
	if gk == nil {
		w, err := g.m.watches.acquire(g.m, fn, key)
		if err != nil {
			return nil, err
		}
		gk = &groupKey{w: w}
		g.keys[id] = gk
		g.subscribes.Add(1)
	}
	if gk.linger != nil {
		if gk.linger.Stop() {
			g.wg.Done() // the callback will not run
		}
		gk.linger = nil
	}
	gk.views++
	v := &View{w: gk.w, g: g, c: make(chan struct{}, 1)}
	w := gk.w
	w.mu.Lock()
	w.views[v] = struct{}{}
	if w.snap.Version > 0 {
		v.c <- struct{}{}
	}
	w.mu.Unlock()
	return v, nil
}

// dropLocked lets go of the group's share of gk (in the background).
func (g *WatchGroup) dropLocked(id string, gk *groupKey) {
	if g.keys[id] == gk {
		delete(g.keys, id)
	}
	for _, t := range []**time.Timer{&gk.linger, &gk.refreshTimer} {
		if *t != nil {
			if (*t).Stop() {
				g.wg.Done()
			}
			*t = nil
		}
	}
	g.unsubscribes.Add(1)
	if g.m.watches.unref(gk.w) {
		// Close waits for the end of every watch the group was the last
		// to hold; those that have ended are dropped here.
		g.ending = slices.DeleteFunc(g.ending, func(w *watch) bool {
			select {
			case <-w.done:
				return true
			default:
				return false
			}
		})
		g.ending = append(g.ending, gk.w)
	}
}

// freezeLocked detaches the group's open Views of w: they keep the
// snapshot they show now and are signalled no more.
func (g *WatchGroup) freezeLocked(w *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for v := range w.views {
		if v.g == g {
			s := w.snap
			v.frozen = &s
			delete(w.views, v)
		}
	}
}

// release is a View's Close.
func (g *WatchGroup) release(w *watch) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := w.id
	gk := g.keys[id]
	if gk == nil || gk.w != w {
		return // the group let go of it already (Close, or it stopped and was replaced)
	}
	gk.views--
	if gk.views > 0 {
		return
	}
	if g.linger == 0 {
		g.dropLocked(id, gk)
		return
	}
	g.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(g.linger, func() {
		defer g.wg.Done()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.keys[id] != gk || gk.linger != t || gk.views > 0 {
			return
		}
		gk.linger = nil
		g.dropLocked(id, gk)
	})
	gk.linger = t
}

// refresh paces View.Refresh per key.
func (g *WatchGroup) refresh(w *watch) {
	g.mu.Lock()
	gk := g.keys[w.id]
	if gk == nil || gk.w != w || gk.refreshTimer != nil {
		g.mu.Unlock()
		return
	}
	now := time.Now()
	next := sat.AddTime(gk.lastRefresh, g.rnInterval)
	if gk.lastRefresh.IsZero() || !now.Before(next) {
		gk.lastRefresh = now
		g.mu.Unlock()
		g.refreshNow(w)
		return
	}
	g.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(next.Sub(now), func() {
		defer g.wg.Done()
		g.mu.Lock()
		if g.keys[w.id] != gk || gk.refreshTimer != t {
			g.mu.Unlock()
			return
		}
		gk.refreshTimer = nil
		gk.lastRefresh = time.Now()
		g.mu.Unlock()
		g.refreshNow(w)
	})
	gk.refreshTimer = t
	g.mu.Unlock()
}

// refreshNow asks the Manager to confirm w's subscription again, unless it
// is confirming it anyway (pending, retrying): a held subscription is
// refreshed too, which ends the hold early when the providers are back.
func (g *WatchGroup) refreshNow(w *watch) {
	if st := w.sub.Status().State; st != StateSubscribed && st != StateHeld {
		return
	}
	g.refreshes.Add(1)
	w.sub.refresh()
}

// Stats returns the group's counters.
func (g *WatchGroup) Stats() WatchGroupStats {
	g.mu.Lock()
	st := WatchGroupStats{Keys: len(g.keys)}
	for _, gk := range g.keys {
		st.Views += gk.views
	}
	g.mu.Unlock()
	st.Subscribes, st.Unsubscribes, st.Refreshes = g.subscribes.Load(), g.unsubscribes.Load(), g.refreshes.Load()
	return st
}

// Close lets go of every key of the group and waits until the subscriptions
// it held last have ended. Open Views keep their last snapshot. It is
// idempotent and returns nil; Watch fails afterwards.
func (g *WatchGroup) Close() error {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		for id, gk := range g.keys {
			g.freezeLocked(gk.w)
			g.dropLocked(id, gk)
		}
	}
	ending := g.ending
	g.mu.Unlock()
	for _, w := range ending {
		<-w.done
	}
	g.wg.Wait()
	return nil
}
