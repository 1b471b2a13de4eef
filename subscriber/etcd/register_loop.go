package etcd

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// Work a repair attempt has to do.
const (
	probeLease = 1 << iota // no keep-alive answer for a TTL, or the lease is gone: does it live?
	ensureKey              // the key changed, or the watch broke: put it back if it must
)

// holder is the state of a registration's loop, owned by its steps (one
// at a time).
type holder struct {
	g       *registration
	lease   clientv3.LeaseID
	rev     int64  // the revision of this loop's last put: watch events up to it are old
	started bool   // the first registration was made: watch events count
	op      string // the kind of request of the last repair (for the observers)
	yielded bool   // another lease holds the key

	pending int             // the repair work due (probeLease, ensureKey)
	run     regstate.Repair // the repairs' run (h is its regstate.Work)

	kaOn   bool            // keeping the lease alive
	kaLast time.Time       // the last answer (or the grant)
	kaTTL  time.Duration   // the TTL it gave
	kaNext time.Time       // when the next request is due (kaT, unless parked)
	kaT    *regstate.Timer // the next keep-alive request, or the TTL's end
	kaEnd  atomic.Int64    // kaLast+kaTTL on kaClock while kaOn, else 0: read by the hub's hold
}

// kaClock is the origin of kaEnd (monotonic).
var kaClock = time.Now()

// start joins the client's hub and makes the first registration in a
// step of the loop, bounded by ctx; an error leaves nothing running.
func (g *registration) start(ctx context.Context) error {
	h := &g.h
	h.g = g
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.loop = regstate.NewLoop(g.ended, g.track)
	h.run.Init(sched, func(gen uint32) {
		g.loop.Post(func() bool {
			if !h.run.Fired(gen) {
				return true
			}
			return h.kick()
		})
	})
	h.kaT = sched.NewTimer(func(gen uint32) {
		// A short step, on the scheduler's goroutine when the loop is
		// idle: only a send, which may block, gets a goroutine.
		g.loop.Do(func() bool {
			if h.kaT.Live(gen) {
				h.kaDue()
			}
			return true
		})
	})
	g.hub = joinHub(g.client, g)
	res := make(chan error, 1)
	g.loop.Post(func() bool {
		err := h.first(ctx)
		res <- err
		return err == nil
	})
	err := <-res
	if err != nil {
		g.cancel()
		<-g.loop.Done()
		g.left()
	}
	return err
}

// first makes the first registration: a lease and the key on it.
func (h *holder) first(ctx context.Context) error {
	g := h.g
	start := time.Now()
	lease, rev, _, err := g.grantAndPut(ctx, true)
	g.track.Attempt(regstate.OpRegister, start, err)
	if err != nil {
		return err
	}
	h.started, h.rev = true, rev
	g.hub.joinWatch(g.prefix, g.key, g, rev)
	h.setLease(lease)
	g.track.Registered()
	h.keepAlive(false)
	return nil
}

// ended runs when the loop has ended: it stops the timers (a repair run
// gives back what it holds) and leaves the hub; left waits for the hub's
// goroutines that this stopped.
func (g *registration) ended() {
	g.h.run.End()
	g.h.kaT.Stop()
	g.left = g.hub.leave(g, g.h.lease, g.prefix, g.key, g.h.started)
}

// kick runs the repairs due, unless a failed one waits; false: stop for
// good.
func (h *holder) kick() bool {
	for h.pending != 0 && !h.run.Waiting() {
		h.g.track.Set(subscriber.RegistrationRepairing, nil)
		if !h.run.Due(h) {
			return false
		}
	}
	return true
}

// ready runs when the client's connection is ready again: a failed
// repair is tried at once, from the start of the policy.
func (g *registration) ready() {
	h := &g.h
	g.loop.Do(func() bool {
		if h.run.Up() {
			g.loop.Post(h.kick)
		}
		return true
	})
}

// watched hands the loop the watch's events on the key; nil: the watch
// broke, and changes may have been missed.
func (g *registration) watched(events []*clientv3.Event) {
	h := &g.h
	g.loop.Do(func() bool {
		if !h.started {
			return true // older than the first put
		}
		need := events == nil
		if !need {
			var seen bool
			need, seen = h.apply(events)
			if !seen {
				return true
			}
		}
		if need {
			h.pending |= ensureKey
			g.loop.Post(h.kick)
		} else {
			h.pending &^= ensureKey
			h.settle()
		}
		return true
	})
}

// settle ends a repair run left with nothing to do (the watch showed the
// key fine, or on another lease, while a failed attempt waited): the
// Registration is registered, not repairing until its next repair.
func (h *holder) settle() {
	if h.pending == 0 && h.run.Running() {
		h.run.End()
		h.g.track.Set(subscriber.RegistrationRegistered, nil)
	}
}

// setLease binds the instance to lease.
func (h *holder) setLease(lease clientv3.LeaseID) {
	old := h.lease
	h.lease = lease
	h.g.lease.Store(int64(lease))
	h.g.hub.keepAlive(h.g, old, lease)
}

// keepAlive starts keeping h.lease alive: at once (now), or a third of
// the TTL after the grant.
func (h *holder) keepAlive(now bool) {
	h.kaOn = true
	h.kaLast = time.Now()
	h.kaTTL = time.Duration(h.g.ttl) * time.Second
	h.kaMark()
	if now {
		h.kaAt(0)
		return
	}
	h.kaAt(h.kaTTL / 3)
}

// kaAt arms the next keep-alive request, d from now.
func (h *holder) kaAt(d time.Duration) {
	h.kaNext = time.Now().Add(d)
	h.kaT.Reset(d)
}

// kaDue has a keep-alive request sent, or probes the lease when none
// was answered for a TTL. With no stream open it parks (no goroutine):
// kaResume, or the TTL's end, wakes it.
func (h *holder) kaDue() {
	g := h.g
	if !h.kaOn {
		return
	}
	now := time.Now()
	end := h.kaLast.Add(h.kaTTL)
	switch {
	case !now.Before(end):
		h.kaOn = false
		h.kaMark()
		g.log.Warn("no keep-alive answer for a TTL (no leader, or unreachable); asking whether the lease lives",
			zap.Int64("lease", int64(h.lease)))
		h.pending |= probeLease
		g.loop.Post(h.kick)
	case g.hub.park(g):
		h.kaT.Reset(end.Sub(now))
	default:
		g.loop.Post(h.kaSend)
	}
}

// kaSend sends a keep-alive request (a step: Send may block).
func (h *holder) kaSend() bool {
	g := h.g
	if !h.kaOn {
		return true
	}
	sent := g.hub.send(g, h.lease)
	now := time.Now()
	end := h.kaLast.Add(h.kaTTL)
	if sent {
		h.kaAt(min(h.kaTTL/3, end.Sub(now)))
	} else {
		h.kaT.Reset(end.Sub(now)) // parked: kaResume, or the TTL's end
	}
	return true
}

// kaAnswer hands the loop a keep-alive answer for lease id.
func (g *registration) kaAnswer(id clientv3.LeaseID, ttl int64) {
	h := &g.h
	g.loop.Do(func() bool {
		if id != h.lease || !h.kaOn {
			return true
		}
		if ttl <= 0 {
			h.kaOn = false
			h.kaMark()
			h.kaT.Stop()
			g.log.Warn("the keep-alive answered that the lease is gone; asking whether it lives", zap.Int64("lease", int64(h.lease)))
			h.pending |= probeLease
			g.loop.Post(h.kick)
			return true
		}
		h.kaLast, h.kaTTL = time.Now(), time.Duration(ttl)*time.Second
		h.kaMark()
		h.kaAt(h.kaTTL / 3)
		return true
	})
}

// kaMark publishes the TTL's end for the hub's hold (kaEnd); a step
// changing kaOn, kaLast or kaTTL calls it, and arms kaT after it when
// the lease is still kept alive.
func (h *holder) kaMark() {
	if !h.kaOn {
		h.kaEnd.Store(0)
		return
	}
	h.kaEnd.Store(int64(h.kaLast.Add(h.kaTTL).Sub(kaClock)))
}

// kaHold parks the keep-alive while the hub holds every lease (no stream
// works): its timer waits for the TTL's end (now is kaClock's reading),
// unless kaResume wakes it before. It runs on the hub's goroutine under
// the hub's lock, not in a step: a step that sets a new end arms kaT
// after it, so the last arming is the step's, or this one at the
// current end (it reads kaEnd again after arming). A lease not kept
// alive (kaEnd 0) is left alone; one that stopped meanwhile may fire
// once at its old end, and kaDue ignores it.
func (h *holder) kaHold(now int64) {
	for end := h.kaEnd.Load(); end != 0; {
		h.kaT.Reset(time.Duration(end - now))
		again := h.kaEnd.Load()
		if again == end {
			return
		}
		end = again
	}
}

// kaResume runs when a keep-alive stream answers again after g's request
// found none, or while the hub held it: a request due is sent soon
// (spread over up to a second), one not due yet at its time.
func (g *registration) kaResume() {
	h := &g.h
	g.loop.Do(func() bool {
		if h.kaOn {
			spread := rand.N(min(time.Second, h.kaTTL/3)) + time.Nanosecond
			h.kaAt(max(spread, time.Until(h.kaNext)))
		}
		return true
	})
}
