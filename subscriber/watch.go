package subscriber

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/closed"
)

// errGroupClosed is returned by WatchGroup.Watch after the group's
// Close. It matches rebound.ErrClosed.
var errGroupClosed = closed.New("subscriber: watch group closed")

// Snapshot is what a View shows of its key at one moment.
type Snapshot struct {
	// Version grows with every change; 0: nothing happened yet.
	Version uint64
	// List is the current list, sorted and shared: do not modify it.
	// HasList reports whether a first list came.
	List    []Instance
	HasList bool
	// Unresolved is the registry's error while no list came yet.
	Unresolved error
	// Stopped is why the subscription stopped for good. List stays.
	Stopped error
}

// NewList reports whether s holds a list that a reader of version since has
// not seen. A stop adds a version but no list.
func (s Snapshot) NewList(since uint64) bool {
	return s.HasList && s.Version > since && !(s.Stopped != nil && s.Version == since+1)
}

// View is one reader's handle on a key's shared list (WatchGroup.Watch).
// It is safe for concurrent use and never blocks on the registry.
type View struct {
	w      *watch
	g      *WatchGroup
	c      chan struct{} // cap 1: a change the reader has not been told of
	closed atomic.Bool
	frozen *Snapshot // guarded by w.mu: the last snapshot, once the group closed
}

// Changed returns a channel that receives a value after changes of the
// snapshot. Changes coalesce: a slow reader finds the latest, never a backlog.
// It is never closed; a new View of a known key has a value waiting.
func (v *View) Changed() <-chan struct{} { return v.c }

// Snapshot returns the view's current snapshot.
func (v *View) Snapshot() Snapshot {
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	if v.frozen != nil {
		return *v.frozen
	}
	return v.w.snap
}

// Refresh asks for a re-confirmation of the key's subscription and returns
// at once. Calls are paced per key by the group; nothing is sent unless the
// subscription is subscribed or held.
func (v *View) Refresh() {
	if v.closed.Load() {
		return
	}
	v.g.refresh(v.w)
}

// Close releases the view's share and returns nil. The last share ends the
// subscription in the background, after the group's linger. It is idempotent.
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
	id      string
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

// update is the subscription's listener.
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
	if ctx.Err() != nil || err != nil && (errors.Is(err, rebound.ErrClosed) || rebound.IsPermanent(err)) {
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
			err = errUnsubscribed
		}
		w.mu.Lock()
		w.snap.Stopped = err
		w.changedLocked()
		w.mu.Unlock()
		if !errors.Is(err, errManagerClosed) {
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
	byKey  map[string]*watch
	bySink sync.Map // Sink -> *watch, for watchedRegistry
}

// acquire returns key's watch with one more reference, starting it (a
// subscription of m and the watch's goroutine) if there is none.
func (ws *watchSet) acquire(m *Manager, fn string, key Key) (*watch, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	id := key.String()
	if w := ws.byKey[id]; w != nil {
		w.refs++
		return w, nil
	}
	if !m.track() {
		return nil, fmt.Errorf("subscriber: %s %s: %w", fn, key, errManagerClosed)
	}
	w := &watch{m: m, id: id, release: make(chan struct{}), done: make(chan struct{}), views: make(map[*View]struct{})}
	// The watch is known by its sink before the first attempt starts, so
	// that every attempt's outcome reaches it (watchedRegistry).
	sub, err := m.subscribe(context.Background(), key, w.update, func(s *Subscription) {
		w.sub = s
		ws.bySink.Store(Sink(&s.sink), w)
	})
	if err != nil {
		m.wg.Done()
		return nil, err
	}
	// A disruption reported before the watch was in the set is in the
	// Status (heard keeps a newer report from being overwritten).
	if st := sub.Status(); st.State == StateRetrying && st.LastErr != nil {
		w.mu.Lock()
		if !w.heard {
			w.unresolvedLocked(st.LastErr)
		}
		w.mu.Unlock()
	}
	if ws.byKey == nil {
		ws.byKey = make(map[string]*watch)
	}
	ws.byKey[id] = w
	w.refs = 1
	go w.run()
	return w, nil
}

// unref drops one reference; the last one ends the watch (in its
// goroutine). It reports whether it was the last.
func (ws *watchSet) unref(w *watch) bool {
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

// confirmed clears the unresolved error of sink's watch: the adapter
// confirmed the subscription (a reconnect the registry's client redid on
// its own, with no Registry.Subscribe to report). Called with the
// subscription's mutex held (w.mu is taken under it, never the reverse).
func (ws *watchSet) confirmed(sink Sink) {
	if w, ok := ws.bySink.Load(sink); ok {
		w := w.(*watch)
		w.mu.Lock()
		w.heard = true
		w.unresolvedLocked(nil)
		w.mu.Unlock()
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
		w.unresolvedLocked(errDisconnected)
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
