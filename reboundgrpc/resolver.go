package reboundgrpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/subscriber"
)

// ccResolver is the resolver of one ClientConn (one Build): a thin reader
// of its key's shared subscriber.View. Its one goroutine waits for the
// view's change signal, builds the state of each new list (the filter) and
// sends it, and sends a state the ClientConn rejected again with backoff;
// Close stops it and waits for it.
type ccResolver struct {
	b      *Builder
	key    subscriber.Key
	id     string
	v      *subscriber.View // replaced by the goroutine only (renew), under mu
	cc     resolver.ClientConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	built  time.Time // when Build returned: unresolved reports start withUnresolvedReport later

	closeOnce sync.Once
	gid       atomic.Uint64 // the goroutine's id: stop does not wait for itself
	renewC    chan struct{} // ResolveNow of a stopped view: subscribe again

	mu     sync.Mutex
	closed bool // Close has taken v

	// the goroutine's own: the version read last (the view holds the
	// list), the state built from its list, and the last renew
	lastRenew time.Time
	renewT    *time.Timer
	seen      uint64
	state     resolver.State
	filtered  int
	good      bool  // state was built by a filter that returned (no panic)
	filterErr error // the filter panicked on list
}

func newResolver(b *Builder, key subscriber.Key, v *subscriber.View, cc resolver.ClientConn) *ccResolver {
	r := &ccResolver{b: b, key: key, id: key.String(), v: v, cc: cc, built: time.Now(), renewC: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

func (r *ccResolver) start() {
	r.wg.Add(1)
	go r.run()
}

// view is what a resolver sends.
type view struct {
	hasList   bool
	state     resolver.State
	good      bool // state comes from a list the filter accepted
	filtered  int
	list      []subscriber.Instance // the registry's list, filtered into state
	err       error
	stopped   bool
	filterErr error // the filter panicked on the latest list
}

// rejectedRun reports a rejected send (err) at now to the run of
// rejections sched, or a new one, and returns the run and its decision:
// wait dec.Delay. A nil run: no delay; the next list is sent when it
// comes.
func (r *ccResolver) rejectedRun(sched *rebound.Schedule, att rebound.Attempt, err error, now time.Time) (*rebound.Schedule, rebound.Attempt, rebound.Decision) {
	for range 2 {
		if sched == nil {
			// The first send was made without asking: its Schedule
			// admits it now (the Retrier has no gates).
			sched = r.b.retry.NewSchedule(now)
			att, _ = sched.Admit(now)
		}
		if dec := att.Done(err, now); !dec.Stop {
			return sched, att, dec
		}
		// A stop (a permanent error, or an attempt no longer
		// outstanding; the Retrier has no limits): a new run decides the
		// delay.
		sched = nil
	}
	return nil, rebound.Attempt{}, rebound.Decision{}
}

// run follows the view until the resolver is closed: each change is sent
// once (the latest, when changes come faster than the ClientConn takes
// them), a rejected state is sent again with backoff (one
// rebound.Schedule per run of rejections, told of the acceptance that
// ends it), and the registry's error reaches a ClientConn with no list
// yet from withUnresolvedReport after Build on.
func (r *ccResolver) run() {
	defer r.wg.Done()
	r.gid.Store(goid.ID())
	var (
		sched   *rebound.Schedule
		att     rebound.Attempt // the send sched admitted last
		timer   *time.Timer
		retryC  <-chan time.Time
		graceT  *time.Timer
		graceC  <-chan time.Time
		sent    uint64 // the version last sent (0: none)
		resend  bool   // the last state was rejected and its delay has passed
		pending bool   // an unresolved error waits for withUnresolvedReport
	)
	defer func() {
		for _, t := range []*time.Timer{timer, graceT, r.renewT} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.renewC:
			if r.renew() { // a new view: nothing of the old one is pending
				sent, resend, pending, retryC, sched = 0, false, false, nil, nil
			}
			continue
		case <-r.v.Changed():
		case <-retryC:
			retryC = nil
			// The resend is due: the engine admits it (or says how long
			// to wait; nothing limits these sends today).
			if sched != nil {
				a, d := sched.Admit(time.Now())
				if !d.Stop && d.Delay > 0 {
					retryC = resetTimer(&timer, d.Delay)
					continue
				}
				att = a
			}
			resend = true
		case <-graceC:
			graceC = nil
		}
		snap := r.v.Snapshot()
		if snap.Version == sent && !resend && !pending {
			continue // already sent (the signal of a change read with the previous one)
		}
		if snap.Version != sent {
			retryC = nil // a newer state replaces the one waiting to be sent again
			if timer != nil {
				timer.Stop() // Go 1.23+ timers: no stale tick after Stop
			}
		}
		resend, pending = false, false
		v, ok := r.viewOf(snap)
		if !ok {
			pending = r.reportLater(snap, &graceT, &graceC)
			continue
		}
		err := r.send(v)
		sent = snap.Version
		if err == nil {
			if sched != nil {
				att.Done(nil, time.Now())
				sched, att = nil, rebound.Attempt{}
			}
			continue
		}
		sched, att, retryC = r.rejected(sched, att, err, len(v.state.Endpoints), &timer)
	}
}

// reportLater reports whether snap's unresolved error waits for
// withUnresolvedReport after Build, and sets the timer that looks again
// then.
func (r *ccResolver) reportLater(snap subscriber.Snapshot, graceT **time.Timer, graceC *<-chan time.Time) bool {
	if snap.Unresolved == nil || r.b.o.unresolved <= 0 {
		return false
	}
	if *graceC == nil {
		*graceC = resetTimer(graceT, time.Until(r.built.Add(r.b.o.unresolved)))
	}
	return true
}

// rejected handles a state the ClientConn rejected with err: the run of
// rejections and the channel of the resend's timer (nil: wait for the
// next list).
func (r *ccResolver) rejected(sched *rebound.Schedule, att rebound.Attempt, err error, endpoints int, timer **time.Timer) (*rebound.Schedule, rebound.Attempt, <-chan time.Time) {
	r.b.rejected.Add(1)
	sched, att, dec := r.rejectedRun(sched, att, err, time.Now())
	if sched == nil {
		r.b.log.Warn("ClientConn rejected the state; waiting for the next list",
			zap.Stringer("key", r.key), zap.Int("endpoints", endpoints), zap.Error(err))
		return nil, att, nil
	}
	r.b.log.Warn("ClientConn rejected the state; sending it again later",
		zap.Stringer("key", r.key), zap.Int("endpoints", endpoints),
		zap.Duration("delay", dec.Delay), zap.Error(err))
	return sched, att, resetTimer(timer, dec.Delay)
}

// resetTimer starts *t (a new timer if nil) to fire after d and returns
// its channel.
func resetTimer(t **time.Timer, d time.Duration) <-chan time.Time {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	return (*t).C
}

// renew replaces a view whose subscription stopped for good by a new one
// of the key (a new subscription, or the one a later Build started), as a
// new Build would; at most once per withResolveNowInterval, else when the
// interval ends. It reports whether it did.
func (r *ccResolver) renew() bool {
	if r.v.Snapshot().Stopped == nil {
		return false
	}
	if wait := time.Until(r.lastRenew.Add(r.b.o.rnInterval)); !r.lastRenew.IsZero() && wait > 0 {
		if r.renewT == nil {
			r.renewT = time.AfterFunc(wait, r.askRenew)
		} else {
			r.renewT.Reset(wait)
		}
		return false
	}
	r.lastRenew = time.Now()
	nv, err := r.b.views.Watch(r.key)
	if err != nil {
		r.b.log.Debug("could not subscribe again", zap.Stringer("key", r.key), zap.Error(err))
		return false
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = nv.Close()
		return false
	}
	old := r.v
	r.v = nv
	r.mu.Unlock()
	_ = old.Close()
	r.seen = 0
	r.b.log.Debug("subscribed again after a stop", zap.Stringer("key", r.key))
	return true
}

// askRenew wakes the goroutine to renew its view.
func (r *ccResolver) askRenew() {
	select {
	case r.renewC <- struct{}{}:
	default:
	}
}

// viewOf builds what snap makes the resolver send; false when there is
// nothing to send yet (no list, not stopped, and no unresolved report due).
// The filter runs once per list, on the resolver's goroutine, with no lock
// held; a filter that panics leaves the last good state in place (see
// filterPanicked).
func (r *ccResolver) viewOf(snap subscriber.Snapshot) (view, bool) {
	fresh := snap.NewList(r.seen)
	r.seen = max(r.seen, snap.Version)
	if fresh {
		st, filtered, perr := r.b.filter(snap.List)
		if perr != nil {
			r.filterErr = perr
			r.b.filterPanicked(r.key, perr)
		} else {
			r.state, r.filtered, r.good, r.filterErr = st, filtered, true, nil
			if len(st.Endpoints) == 0 {
				r.b.filteredOut(r.id, r.key, snap.Version, snap.List)
			} else {
				r.b.filteredOut(r.id, r.key, snap.Version, nil) // a usable list: the next filtered one is logged
			}
		}
	}
	v := view{hasList: snap.HasList, state: r.state, good: r.good, filtered: r.filtered, list: snap.List, filterErr: r.filterErr}
	switch {
	case snap.Stopped != nil:
		v.stopped = true
		v.err = fmt.Errorf("reboundgrpc: subscription %s stopped: %w", keyName(r.key), snap.Stopped)
		r.b.log.Debug("subscription stopped", zap.Stringer("key", r.key), zap.Error(snap.Stopped))
	case snap.HasList:
	case snap.Unresolved != nil:
		if r.b.o.unresolved == 0 || time.Now().Before(r.built.Add(r.b.o.unresolved)) {
			return v, false
		}
		v.err = fmt.Errorf("%w for %s: %w", errUnresolved, keyName(r.key), snap.Unresolved)
	default:
		return v, false // nothing yet
	}
	return v, true
}

// send hands one view to the ClientConn. Only a non-empty state the
// ClientConn rejects is an error (retried by run): an empty list is sent as
// an empty state, which grpc-go's balancers apply (closing their
// sub-connections) and answer with balancer.ErrBadResolverState by design,
// followed by ReportError with a clear reason, which is what fails
// fail-fast RPCs; sending it again would change nothing.
//
// A filter that panicked on the latest list leaves the last good state
// (sent again: the ClientConn keeps its connections); with none, the
// ClientConn hears the panic through ReportError.
func (r *ccResolver) send(v view) error {
	if v.hasList && v.filterErr != nil && !v.good {
		r.cc.ReportError(fmt.Errorf("reboundgrpc: the filter of %s panicked; no list yet: %w", keyName(r.key), v.filterErr))
		return nil
	}
	switch {
	case v.hasList && len(v.state.Endpoints) > 0:
		err := r.cc.UpdateState(v.state)
		if err == nil && v.stopped {
			r.cc.ReportError(v.err)
		}
		return err
	case v.hasList:
		_ = r.cc.UpdateState(resolver.State{})
		reason := fmt.Errorf("%w for %s in the registry", errNoInstances, keyName(r.key))
		if len(v.list) > 0 {
			reason = fmt.Errorf("%w for %s: the registry lists %s (the filter keeps healthy, enabled instances by default)",
				errNoInstances, keyName(r.key), filteredOut(r.b.o.custom, v.list))
		}
		if v.stopped {
			reason = fmt.Errorf("%w; %w", reason, v.err)
		}
		r.cc.ReportError(reason)
		return nil
	case v.err != nil:
		r.cc.ReportError(v.err)
		return nil
	}
	return nil
}

// ResolveNow implements resolver.Resolver: it asks for a re-confirmation
// of the shared subscription (View.Refresh), coalesced across every
// ClientConn using it (see withResolveNowInterval), also while the
// subscription holds an empty list back (StateHeld): the registry is then
// asked whether the providers are back. Once the subscription stopped for
// good, it subscribes again instead, as a new Build would (at most once
// per withResolveNowInterval for the ClientConn). It never blocks.
func (r *ccResolver) ResolveNow(resolver.ResolveNowOptions) {
	r.b.resolveNows.Add(1)
	r.mu.Lock()
	v := r.v
	r.mu.Unlock()
	if v.Snapshot().Stopped != nil {
		r.askRenew()
		return
	}
	v.Refresh()
}

// Close implements resolver.Resolver: it releases the ClientConn's View
// (the shared subscription lingers, see withLinger) and waits for the
// resolver's goroutine. Idempotent.
func (r *ccResolver) Close() {
	r.stop()
	r.mu.Lock()
	r.closed = true
	v := r.v
	r.mu.Unlock()
	_ = v.Close()
	r.b.forget(r)
}

// stop ends the resolver's goroutine and waits for it, unless called on
// it (Builder.Close from the WithFilter function or a hook): the goroutine
// then ends when that call returns.
func (r *ccResolver) stop() {
	r.closeOnce.Do(r.cancel)
	if r.gid.Load() == goid.ID() {
		return
	}
	r.wg.Wait()
}
