package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// prefixWatch is the one watch of a client on a service prefix: it hands
// the events of each instance key to the Registrations of that key.
type prefixWatch struct {
	h      *hub
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	// Under hubs.mu.
	refs   int
	keys   map[string]map[*registration]struct{}
	from   int64              // the watch has seen, or will see, every change from this revision on
	next   int64              // the next revision it will see
	rewind bool               // open the watch again from next
	inner  context.CancelFunc // ends the watch open now
}

// joinWatch adds g as a watcher of key below prefix, which g put at
// revision rev: the watch sees every later change of it. The first
// Registration below a prefix starts its watch; a Registration whose put
// is older than the watch's start opens it again from its own.
func (h *hub) joinWatch(prefix, key string, g *registration, rev int64) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	w := h.watches[prefix]
	if w == nil {
		ctx, cancel := context.WithCancel(h.ctx)
		w = &prefixWatch{h: h, prefix: prefix, cancel: cancel, done: make(chan struct{}),
			keys: map[string]map[*registration]struct{}{}, from: rev + 1, next: rev + 1}
		h.watches[prefix] = w
		go w.run(ctx)
	} else if rev+1 < w.from {
		w.rewindLocked(rev + 1)
	}
	w.refs++
	rs := w.keys[key]
	if rs == nil {
		rs = map[*registration]struct{}{}
		w.keys[key] = rs
	}
	rs[g] = struct{}{}
}

// rewatch tells the watch of prefix that a new lease's key was put at
// rev, the cluster's revision then: a watch waiting for a later one
// follows a cluster whose revisions went back (it lost its data), and
// is opened again from rev.
func (h *hub) rewatch(prefix string, rev int64) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if w := h.watches[prefix]; w != nil && w.next > rev+1 {
		w.rewindLocked(rev + 1)
	}
}

func (w *prefixWatch) rewindLocked(rev int64) {
	w.from, w.next, w.rewind = rev, rev, true
	if w.inner != nil {
		w.inner()
	}
}

// open starts the next watch, from w.next; cancel ends it.
func (w *prefixWatch) open(ctx context.Context) (wctx context.Context, wch clientv3.WatchChan, cancel context.CancelFunc) {
	wctx, cancel = context.WithCancel(ctx)
	hubs.mu.Lock()
	next := w.next
	w.rewind = false
	w.inner = cancel
	hubs.mu.Unlock()
	// Watch waits for the connection: not under hubs.mu.
	return wctx, w.h.client.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(next)), cancel
}

// rewound reports whether the watch ended because a Registration asked
// for an earlier start.
func (w *prefixWatch) rewound() bool {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	w.inner = nil
	return w.rewind
}

// run watches the prefix until ctx is done. A watch that breaks
// (compaction, an error) is opened again after hubRetry, from where it
// stopped, and every Registration below the prefix checks its key. The
// watch does not require a leader: during a quorum loss it waits.
func (w *prefixWatch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTimer(hubRetry)
	defer t.Stop()
	for {
		wctx, wch, cancel := w.open(ctx)
		w.follow(wctx, wch)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if w.rewound() {
			continue
		}
		w.broken()
		t.Reset(hubRetry)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// follow delivers the events of wch until it breaks or ctx is done (a
// cancelled watch's channel may close only once the connection is back:
// it is not waited for).
func (w *prefixWatch) follow(ctx context.Context, wch clientv3.WatchChan) {
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return
		case wr, ok = <-wch:
		}
		if !ok {
			return
		}
		if wr.CompactRevision != 0 {
			hubs.mu.Lock()
			if ctx.Err() == nil {
				w.next = max(w.next, wr.CompactRevision)
			}
			hubs.mu.Unlock()
		}
		if wr.Err() != nil || wr.Canceled {
			return
		}
		w.deliver(ctx, wr.Events)
	}
}

// deliver hands each Registration the events of its key.
func (w *prefixWatch) deliver(ctx context.Context, events []*clientv3.Event) {
	var to map[*registration][]*clientv3.Event
	hubs.mu.Lock()
	if ctx.Err() != nil {
		hubs.mu.Unlock()
		return // rewound: the next watch delivers them
	}
	for _, ev := range events {
		w.next = max(w.next, ev.Kv.ModRevision+1)
		for g := range w.keys[string(ev.Kv.Key)] {
			if to == nil {
				to = map[*registration][]*clientv3.Event{}
			}
			to[g] = append(to[g], ev)
		}
	}
	hubs.mu.Unlock()
	for g, evs := range to {
		g.watched(evs)
	}
}

// broken tells every Registration below the prefix that changes may
// have been missed.
func (w *prefixWatch) broken() {
	var regs []*registration
	hubs.mu.Lock()
	for _, rs := range w.keys {
		for g := range rs {
			regs = append(regs, g)
		}
	}
	hubs.mu.Unlock()
	for _, g := range regs {
		g.watched(nil)
	}
}
