package subscriber

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// ErrWatchGroupClosed is returned by WatchGroup.Watch after the group's
// Close. It matches rebound.ErrClosed.
var ErrWatchGroupClosed = rebound.NewClosedError("subscriber: watch group closed")

// Snapshot is what a View shows of its key at one moment.
type Snapshot struct {
	// Version grows by one with every change of the snapshot (a list, an
	// unresolved error that appears, changes or clears, the stop); 0 means
	// nothing has happened yet. A reader that has handled a version can
	// skip a signal that finds the same one.
	Version uint64
	// List is the current instance list, as a Listener receives it (sorted,
	// shared by every reader: do not modify it). HasList reports whether a
	// first list has arrived; List is nil before.
	List    []Instance
	HasList bool
	// Unresolved is set while no list has arrived and the last
	// Registry.Subscribe attempt failed (or the registry connection was
	// lost): the registry's error. It clears with the first list or an
	// acknowledged attempt, and is never set once a list has arrived (the
	// Manager keeps the last list through outages).
	Unresolved error
	// Stopped is set once the shared subscription stopped for good (the
	// Manager closed, a permanent registry error): the reason
	// (Subscription.Err). List keeps the last list. A later Watch of the
	// key starts a new subscription.
	Stopped error
}

// View is one reader's handle on the shared view of a key's instance list
// that the Manager keeps (see Manager.Watch). Every View of one key shares
// one Manager subscription; the last Close (after its group's linger, see
// NewWatchGroup) ends it.
//
// A View is safe for concurrent use. Its methods never block on the
// registry.
type View struct {
	w      *watch
	g      *WatchGroup
	c      chan struct{} // cap 1: a change the reader has not been told of
	closed atomic.Bool
}

// Key returns the view's key.
func (v *View) Key() Key { return v.w.sub.Key() }

// Changed returns a channel that receives a value after each change of the
// snapshot. Changes coalesce: a reader that is slow sees one value for any
// number of changes, and Snapshot then returns the latest; it never works
// through a backlog. The channel is the same on every call; it is never
// closed (a stop is a change: see Snapshot.Stopped). A new View whose key
// already has something to show has a value waiting.
func (v *View) Changed() <-chan struct{} { return v.c }

// Snapshot returns the view's current snapshot.
func (v *View) Snapshot() Snapshot {
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	return v.w.snap
}

// Refresh asks for a re-confirmation of the shared subscription
// (Subscription.Refresh), paced per key by the group's refresh interval
// (see WatchRefreshInterval): the first call after a quiet interval is
// served at once, the calls within the interval by one re-confirmation at
// its end. Nothing is sent while the subscription is not subscribed or
// held. It never blocks. After Close it does nothing.
func (v *View) Refresh() {
	if v.closed.Load() {
		return
	}
	v.g.refresh(v.w)
}

// Close releases the view's share of the subscription and returns nil. The
// last share ends the subscription in the background, once the group's
// linger has passed. Close is idempotent and never blocks on the registry.
func (v *View) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	v.w.mu.Lock()
	delete(v.w.views, v)
	v.w.mu.Unlock()
	v.g.release(v.w)
	return nil
}

// watch is the shared state of one key: one Manager subscription, its
// snapshot, and the views to signal.
type watch struct {
	m       *Manager
	id      KeyID
	sub     *Subscription
	release chan struct{} // closed when no group holds the watch any more
	done    chan struct{} // closed once the subscription has ended

	// guarded by Manager.watches.mu
	refs int  // groups holding the watch
	gone bool // no longer the key's watch: a later Watch starts a new one

	mu    sync.Mutex
	snap  Snapshot
	heard bool // an attempt's outcome was reported (newer than any Status read)
	views map[*View]struct{}
}

// changedLocked bumps the version and signals every view, coalescing.
func (w *watch) changedLocked() {
	w.snap.Version++
	for v := range w.views {
		select {
		case v.c <- struct{}{}:
		default:
		}
	}
}

// update is the subscription's Listener.
func (w *watch) update(list []Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.snap.Stopped != nil {
		return
	}
	w.snap.List, w.snap.HasList, w.snap.Unresolved = list, true, nil
	w.changedLocked()
}

// attempted records the outcome of one Registry.Subscribe attempt.
func (w *watch) attempted(ctx context.Context, err error) {
	if ctx.Err() != nil || err != nil && (errors.Is(err, ErrRegistryClosed) || rebound.IsPermanent(err)) {
		return // cancelled (not the registry's answer), or a stop that Done reports
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard = true
	w.unresolvedLocked(err)
}

// unresolvedLocked sets (err != nil) or clears the unresolved error while
// there is no list.
func (w *watch) unresolvedLocked(err error) {
	if w.snap.HasList || w.snap.Stopped != nil {
		return
	}
	old := w.snap.Unresolved
	if (old == nil) == (err == nil) && (err == nil || old.Error() == err.Error()) {
		return // unchanged: not a change for the readers
	}
	w.snap.Unresolved = err
	w.changedLocked()
}

// run is the watch's goroutine (owned by the Manager's WaitGroup): it ends
// the subscription when the last group lets go, or reports its stop.
func (w *watch) run() {
	defer w.m.wg.Done()
	defer close(w.done)
	select {
	case <-w.sub.Done():
		w.m.watches.forget(w)
		err := w.sub.Err()
		if err == nil {
			err = ErrUnsubscribed
		}
		w.mu.Lock()
		w.snap.Stopped = err
		w.changedLocked()
		w.mu.Unlock()
		if !errors.Is(err, ErrManagerClosed) {
			w.m.log.Info("watched subscription stopped", zap.Stringer("key", w.sub.key), zap.Error(err))
		}
	case <-w.release:
		w.m.watches.bySink.Delete(Sink(&w.sub.sink))
		if err := w.sub.Unsubscribe(); err != nil {
			w.m.log.Warn("unsubscribe of a watched key failed", zap.Stringer("key", w.sub.key), zap.Error(err))
		}
	}
}

// watchSet is the Manager's watches, one per key.
type watchSet struct {
	mu     sync.Mutex
	byKey  map[KeyID]*watch
	bySink sync.Map // Sink -> *watch, for watchedRegistry
	dflt   *WatchGroup
	once   sync.Once
}

// acquire returns key's watch with one more reference, starting it (a
// Manager subscription and the watch's goroutine) if there is none.
func (m *Manager) acquireWatch(fn string, key Key) (*watch, error) {
	ws := &m.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	id := key.ID()
	if w := ws.byKey[id]; w != nil {
		w.refs++
		return w, nil
	}
	if !m.track() {
		return nil, fmt.Errorf("subscriber: %s %s: %w", fn, key, ErrManagerClosed)
	}
	w := &watch{m: m, id: id, release: make(chan struct{}), done: make(chan struct{}), views: make(map[*View]struct{})}
	sub, err := m.Subscribe(context.Background(), key, w.update)
	if err != nil {
		m.wg.Done()
		return nil, err
	}
	w.sub = sub
	ws.bySink.Store(Sink(&sub.sink), w)
	// Outcomes reported from now on are seen; one that came before is in
	// the Status (heard keeps a newer report from being overwritten).
	if st := sub.Status(); st.State == StateRetrying && st.LastErr != nil {
		w.mu.Lock()
		if !w.heard {
			w.unresolvedLocked(st.LastErr)
		}
		w.mu.Unlock()
	}
	if ws.byKey == nil {
		ws.byKey = make(map[KeyID]*watch)
	}
	ws.byKey[id] = w
	w.refs = 1
	go w.run()
	return w, nil
}

// unrefWatch drops one reference; the last one ends the watch (in its
// goroutine). It reports whether it was the last.
func (m *Manager) unrefWatch(w *watch) bool {
	ws := &m.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.refs--
	if w.refs > 0 {
		return false
	}
	if !w.gone {
		w.gone = true
		delete(ws.byKey, w.id)
	}
	close(w.release)
	return true
}

// forget takes a stopped watch out of the set.
func (ws *watchSet) forget(w *watch) {
	ws.bySink.Delete(Sink(&w.sub.sink))
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !w.gone {
		w.gone = true
		delete(ws.byKey, w.id)
	}
}

// disconnected marks every watch without a list unresolved (the
// ConnectionMonitor reported the connection lost).
func (ws *watchSet) disconnected() {
	ws.mu.Lock()
	list := make([]*watch, 0, len(ws.byKey))
	for _, w := range ws.byKey {
		list = append(list, w)
	}
	ws.mu.Unlock()
	for _, w := range list {
		w.mu.Lock()
		w.unresolvedLocked(ErrDisconnected)
		w.mu.Unlock()
	}
}

// watchedRegistry is the Registry the Manager's subscriptions call: the
// adapter, with each Subscribe outcome reported to the key's watch.
type watchedRegistry struct {
	Registry
	ws *watchSet
}

func (r *watchedRegistry) Subscribe(ctx context.Context, key Key, sink Sink) error {
	err := r.Registry.Subscribe(ctx, key, sink)
	if w, ok := r.ws.bySink.Load(sink); ok {
		w.(*watch).attempted(ctx, err)
	}
	return err
}

// Watch returns a View of key's instance list, shared with every other
// View of the key: the first Watch of a key starts one Manager
// subscription (Subscribe, which returns at once), later ones join it, and
// it ends in the background when the last View is closed. The view shows
// the current list and pushes every change to Changed, coalescing; a key
// that has no list yet shows the registry's error (Snapshot.Unresolved),
// and a subscription that stops for good shows why (Snapshot.Stopped).
// Views from Watch belong to the Manager's own group, with no linger and
// no refresh pacing beyond the Manager's (see NewWatchGroup for a group of
// its own).
//
// Errors: an *ArgumentError (wrapping rebound.ErrInvalidArgument) for a
// key Subscribe would reject (an empty service, an empty cluster name);
// an error wrapping ErrManagerClosed after Close.
func (m *Manager) Watch(key Key) (*View, error) {
	ws := &m.watches
	ws.once.Do(func() { ws.dflt = &WatchGroup{m: m, keys: make(map[KeyID]*groupKey)} })
	return ws.dflt.watch("subscriber.Manager.Watch", key)
}

// A WatchGroupOption configures NewWatchGroup.
type WatchGroupOption interface {
	apply(*WatchGroup)
}

type watchGroupOption func(*WatchGroup)

func (f watchGroupOption) apply(g *WatchGroup) { f(g) }

// WatchLinger keeps a key's subscription for d after the group's last View
// of it is closed, so that a View opened again within d (a gRPC ClientConn
// leaving idle mode) shows the last list at once and costs the registry
// nothing. Default: 0 (the last Close releases the key at once). d must not
// be negative.
func WatchLinger(d time.Duration) WatchGroupOption {
	return watchGroupOption(func(g *WatchGroup) {
		if d < 0 {
			g.errs = append(g.errs, argError("subscriber.WatchLinger", "d", "must not be negative (0 releases at once)"))
			return
		}
		g.linger = d
	})
}

// WatchRefreshInterval sets the least time between two re-confirmations of
// one key that the group's View.Refresh calls lead to: the first call after
// a quiet interval is served at once, the others in the interval by one at
// its end. Default: the Manager's WithRefreshInterval plus one second (so
// that the Manager does not drop the one sent at the end of an interval).
// d must be positive.
func WatchRefreshInterval(d time.Duration) WatchGroupOption {
	return watchGroupOption(func(g *WatchGroup) {
		if d <= 0 {
			g.errs = append(g.errs, argError("subscriber.WatchRefreshInterval", "d", "must be > 0"))
			return
		}
		g.rnInterval = d
	})
}

// WatchGroup is the Views of one component built over a Manager (a gRPC
// resolver Builder, a kratos Discovery): it holds one share of each key's
// subscription while it has a View of the key (or lingers, see
// WatchLinger), paces their refreshes, counts what it did, and ends all of
// it at once with Close. Views of different groups share the Manager's
// one subscription of a key too.
//
// Create it with NewWatchGroup; the zero WatchGroup is not usable. It is
// safe for concurrent use.
type WatchGroup struct {
	m          *Manager
	linger     time.Duration
	rnInterval time.Duration
	errs       []error

	wg sync.WaitGroup // linger and refresh timers whose callback may run

	mu     sync.Mutex
	closed bool
	keys   map[KeyID]*groupKey

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
	// Keys is the number of keys the group holds now (with a View open or
	// lingering); Views the number of its Views open now.
	Keys, Views int
	// Subscribes and Unsubscribes count the times the group took and let
	// go of a key's share.
	Subscribes, Unsubscribes uint64
	// Refreshes counts the re-confirmations View.Refresh calls led to.
	Refreshes uint64
}

// NewWatchGroup returns an empty group of Views over m. It returns an
// *ArgumentError for a bad option (nil options are ignored) and an error
// wrapping ErrManagerClosed after Close. Defaults: no linger, refreshes
// paced at the Manager's refresh interval plus one second.
func (m *Manager) NewWatchGroup(opts ...WatchGroupOption) (*WatchGroup, error) {
	g := &WatchGroup{m: m, rnInterval: m.opts.refreshMin + time.Second, keys: make(map[KeyID]*groupKey)}
	for _, o := range opts {
		if o != nil {
			o.apply(g)
		}
	}
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	if m.Closed() {
		return nil, fmt.Errorf("subscriber: NewWatchGroup: %w", ErrManagerClosed)
	}
	return g, nil
}

// Watch returns a View of key in the group (see Manager.Watch). Errors:
// those of Manager.Watch, and ErrWatchGroupClosed after Close.
func (g *WatchGroup) Watch(key Key) (*View, error) {
	return g.watch("subscriber.WatchGroup.Watch", key)
}

func (g *WatchGroup) watch(fn string, key Key) (*View, error) {
	if strings.TrimSpace(key.Service) == "" {
		return nil, argError(fn, "key.Service", "is empty or only white space")
	}
	for i, c := range key.Clusters {
		if strings.TrimSpace(c) == "" {
			return nil, argError(fn, fmt.Sprintf("key.Clusters[%d]", i), "is empty or only white space")
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrWatchGroupClosed
	}
	id := key.ID()
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
		w, err := g.m.acquireWatch(fn, key)
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
func (g *WatchGroup) dropLocked(id KeyID, gk *groupKey) {
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
	g.m.unrefWatch(gk.w)
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
	next := gk.lastRefresh.Add(g.rnInterval)
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
	w.sub.Refresh()
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

// Close lets go of every key of the group, lingering or not, and waits
// until the subscriptions it was the last to hold have ended (each
// Registry.Unsubscribe is bounded by UnsubscribeTimeout) and its timers
// are done. Views still open keep their last snapshot and see no further
// change; their Close does nothing more. Watch returns ErrWatchGroupClosed
// afterwards. Close is idempotent and returns nil.
func (g *WatchGroup) Close() error {
	g.mu.Lock()
	var ended []*watch
	if !g.closed {
		g.closed = true
		for id, gk := range g.keys {
			last := gk.w
			g.dropLocked(id, gk)
			ended = append(ended, last)
		}
	}
	g.mu.Unlock()
	for _, w := range ended {
		g.m.watches.mu.Lock()
		gone := w.refs == 0
		g.m.watches.mu.Unlock()
		if gone {
			<-w.done
		}
	}
	g.wg.Wait()
	return nil
}
