package reboundgrpc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
)

// ccResolver is the resolver of one ClientConn (one Build). It runs a
// goroutine only while it has a state to send (or to send again after the
// ClientConn rejected it); Close stops it and waits for it.
type ccResolver struct {
	b      *Builder
	e      *entry
	cc     resolver.ClientConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // cap 1: a newer state is waiting

	mu      sync.Mutex
	closed  bool
	running bool
	dirty   bool // the entry has a version this resolver has not sent
}

// notify tells r that its entry has a new version.
func (r *ccResolver) notify() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.dirty = true
	if r.running {
		select {
		case r.wake <- struct{}{}:
		default:
		}
		return
	}
	r.running = true
	r.wg.Add(1)
	go r.run()
}

// run sends the entry's latest state until there is nothing new, retrying
// a rejected state with backoff: one rebound.Schedule per run (the step
// function every loop of rebound runs on), told of every rejection and of
// the acceptance that ends it.
func (r *ccResolver) run() {
	defer r.wg.Done()
	var sched *rebound.Schedule
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sent := uint64(0)
	for {
		r.mu.Lock()
		if r.closed || !r.dirty {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.dirty = false
		r.mu.Unlock()

		v := r.b.view(r.e)
		if v.version == sent && sent != 0 {
			continue // already sent (a retry found nothing newer)
		}
		err := r.send(v)
		if err == nil {
			sent = v.version
			if sched != nil {
				sched.Succeeded(time.Now())
				sched = nil
			}
			continue
		}
		r.b.rejected.Add(1)
		now := time.Now()
		if sched == nil {
			sched = r.b.retry.NewSchedule(now)
		}
		d, stop := sched.Next(err, now)
		if stop != nil {
			// Unreachable with the policies WithPolicy admits (no
			// MaxAttempts, no MaxElapsed, every error transient): keep
			// trying at the policy's cap rather than drop the state.
			d = r.b.o.policy.Normalized().Max
			sched = nil
		}
		r.b.log.Warn("ClientConn rejected the state; sending it again later",
			zap.Stringer("key", r.e.key), zap.Int("endpoints", len(v.state.Endpoints)),
			zap.Duration("delay", d), zap.Error(err))
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake: // a newer state: send it now
			timer.Stop() // Go 1.23+ timers: no stale tick after Stop
		case <-timer.C:
			r.mu.Lock()
			r.dirty = true // send the same state again
			r.mu.Unlock()
		}
	}
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
		r.cc.ReportError(fmt.Errorf("reboundgrpc: the filter of %s panicked; no list yet: %w", keyName(r.e.key), v.filterErr))
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
		reason := fmt.Errorf("%w for %s in the registry", ErrNoInstances, keyName(r.e.key))
		if v.total > 0 {
			reason = fmt.Errorf("%w for %s: the registry lists %d, none passes the filter (healthy and enabled by default)", ErrNoInstances, keyName(r.e.key), v.total)
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
// of the shared subscription (Subscription.Refresh), coalesced across every
// ClientConn using it (see WithResolveNowInterval), also while the
// subscription holds an empty list back (StateHeld): the registry is then
// asked whether the providers are back. It never blocks.
func (r *ccResolver) ResolveNow(resolver.ResolveNowOptions) {
	r.b.resolveNow(r.e)
}

// Close implements resolver.Resolver: it detaches the ClientConn from the
// shared subscription (which lingers, see WithLinger) and waits for the
// resolver's goroutine. Idempotent.
func (r *ccResolver) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.b.release(r)
	r.cancel()
	r.wg.Wait()
}
