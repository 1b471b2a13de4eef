package nacos

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
)

// MonitorConnection implements subscriber.ConnectionMonitor by polling the
// client's ServerHealthy. After each connect (true) it confirms, from evidence,
// every subscription whose last Subscribe succeeded.
// It returns nil when ctx is done, and an error matching rebound.ErrClosed once
// the Registry or its client is closed (probed every 10 s while down).
func (r *Registry) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	r.monitoring.Store(true)
	defer r.monitoring.Store(false)
	var ep *episode
	up := r.client.ServerHealthy()
	lastCheck := time.Now()
	r.up.Store(up)
	if !up {
		r.takeBaselines()
		report(false)
	}
	t := time.NewTimer(r.cfg.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if r.closed.Load() || r.clientClosed.Load() {
			return errClosed
		}
		var h bool
		if up {
			h = r.client.ServerHealthy() // an atomic load in the SDK while connected
		} else {
			// While the client is down, ServerHealthy makes HTTP requests:
			// call it every downPoll only. In between, new data from the
			// server in the SDK's cache (its redo ran) also tells that the
			// client is connected again.
			if time.Since(lastCheck) >= r.cfg.downPoll {
				h, lastCheck = r.client.ServerHealthy(), time.Now()
			}
			if !h && r.evidenceWhileDown() {
				r.log.Debug("new data from the server in the SDK's cache: connected again")
				h = true
			}
			if !h && r.probeDue() && r.probeClosed() {
				// The Manager subscribes nothing while the connection is
				// down (the SDK's redo would), so no Subscribe would ever
				// find out: the monitor asks.
				r.log.Info("the SDK client was closed (CloseClient): the registry is closed")
				return errClosed
			}
		}
		switch {
		case !h && up:
			r.log.Debug("connection lost")
			up, ep = false, nil
			r.up.Store(false)
			lastCheck = time.Now()
			r.takeBaselines()
			report(false)
		case h && !up:
			r.log.Debug("connected again")
			up = true
			r.up.Store(true)
			report(true)
			ep = r.startEpisode()
		}
		if ep != nil && r.checkEpisode(ep) {
			ep = nil
		}
		t.Reset(r.cfg.poll)
	}
}

// evidenceWhileDown looks at a few keys the SDK has cached (map order: a
// different sample each time) for data newer than their baseline.
func (r *Registry) evidenceWhileDown() bool {
	const sample = 4
	var gs [sample]*group
	n := 0
	r.mu.Lock()
	for _, g := range r.groups {
		if n == sample {
			break
		}
		if g.baseline.Load() > 0 {
			gs[n] = g
			n++
		}
	}
	r.mu.Unlock()
	for _, g := range gs[:n] {
		if !g.mu.TryLock() {
			continue
		}
		ref, ok := r.peekLocked(g)
		g.mu.Unlock()
		if ok && ref > g.baseline.Load() {
			return true
		}
	}
	return false
}

// groupsSnapshot returns the current groups.
func (r *Registry) groupsSnapshot() []*group {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Values(r.groups))
}

// takeBaselines records, for every key, the LastRefTime the SDK's cache
// holds when the disconnection is seen: after the reconnect, a newer one is
// evidence from the new connection. A key busy in an SDK call keeps the
// last value read.
func (r *Registry) takeBaselines() {
	for _, g := range r.groupsSnapshot() {
		if g.mu.TryLock() {
			r.peekLocked(g)
			g.mu.Unlock()
		}
		g.baseline.Store(g.lastRef.Load())
	}
}

// episode is the wait for evidence after one reconnect.
type episode struct {
	start, progress time.Time
	pending         map[*group][]*sub
}

// startEpisode collects the subscriptions the adapter owes the Manager an
// answer for: those whose last Subscribe succeeded.
func (r *Registry) startEpisode() *episode {
	now := time.Now()
	ep := &episode{start: now, progress: now, pending: map[*group][]*sub{}}
	r.mu.Lock()
	for _, g := range r.groups {
		for s := range g.subs {
			if s.ok.Load() {
				ep.pending[g] = append(ep.pending[g], s)
			}
		}
	}
	r.mu.Unlock()
	return ep
}

// checkEpisode confirms the subscriptions whose key shows evidence, hands
// back the rest once the window has passed, and reports whether the
// episode is over. Sinks are called without locks held.
func (r *Registry) checkEpisode(ep *episode) bool {
	var confirm []*sub
	now := time.Now()
	for g, subs := range ep.pending {
		if !g.mu.TryLock() {
			continue // an SDK call for the key is in flight: look again next time
		}
		ref, ok := r.peekLocked(g)
		g.mu.Unlock()
		if ok && ref > g.baseline.Load() {
			confirm = append(confirm, subs...)
			delete(ep.pending, g)
			ep.progress = now
		}
	}
	for _, s := range confirm {
		if s.ok.Load() && s.active.Load() {
			s.sink.Confirmed("SDK cache refreshed from the server after the reconnect")
		}
	}
	if len(ep.pending) == 0 {
		return true
	}
	if now.Sub(ep.progress) < r.cfg.window && now.Sub(ep.start) < r.cfg.cap {
		return false
	}
	n := 0
	for _, subs := range ep.pending {
		for _, s := range subs {
			if s.ok.Load() && s.active.Load() {
				s.handedBack.Store(true)
				s.sink.Resubscribe(errNoEvidence)
				n++
			}
		}
	}
	r.log.Info("subscriptions without evidence after a reconnect: handed back", zap.Int("subscriptions", n),
		zap.Duration("since_reconnect", now.Sub(ep.start)))
	return true
}
