package nacos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/internal/regstate"
)

// stop ends the loop (bounded by ctx) and gives the service's slot on the
// client back.
func (g *registration) stop(ctx context.Context) error {
	g.loop.Stop()
	select {
	case <-g.loop.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	g.stopOnce.Do(func() { g.h.detach(g) })
	return nil
}

// Close stops repairing, at once and without a request: the instance stays
// registered while the client's connection lives (the SDK's redo also
// keeps re-sending it after reconnects, as it does for any instance the
// client registered). Use Shutdown to deregister. Close is idempotent,
// returns once the repair loop's step in flight has ended, and returns nil.
func (g *registration) Close() error {
	if g.track.InObserver() { // Close would wait for the step calling the observer
		go func() { _ = g.Close() }()
		return fmt.Errorf("nacos: Registration.Close from its observer: stopping in the background: %w", rebound.ErrCalledFromCallback)
	}
	_ = g.stop(context.Background())
	select {
	case g.shut <- struct{}{}:
	default:
		// A Shutdown is running: it gives the slot back and ends in
		// stopped (even if its ctx ends first); Close does not wait for
		// its requests.
		g.closeReq.Store(true)
		return nil
	}
	if !g.released {
		g.released = true
		g.h.release(g)
	}
	<-g.shut
	g.track.Set(subscriber.RegistrationStopped, nil)
	return nil
}

// Shutdown stops repairing and deregisters the instance: a deregister
// request (which also removes the SDK's redo entry, so no later reconnect
// registers it again), then a query of the server's list; it returns nil
// once the server no longer lists the instance with the values this
// Registration sent (the address listed with other values is another
// client's instance, which this client cannot remove), retrying both (through
// the registration's policy) until then or until ctx is done (it then
// returns ctx's error, or the last attempt's). A closed client counts as
// deregistered once the server's list confirms it (its connection
// closed, so the server dropped its instances). Shutdown may follow
// Close; if another Registration of the same service on the same client
// was made in between (Nacos then holds its instance in place of this
// one, even after that one's Close), Shutdown sends nothing and returns
// nil, so as not to deregister that one. Later calls return the first one's result, unless it ended
// on ctx, in which case they try again.
func (g *registration) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return &rebound.ArgumentError{Func: "nacos.Registration.Shutdown", Arg: "ctx", Reason: "must not be nil"}
	}
	if g.track.InObserver() { // Shutdown would wait for the step calling the observer
		go func() { _ = g.Shutdown(ctx) }()
		return fmt.Errorf("nacos: Registration.Shutdown from its observer: stopping in the background: %w", rebound.ErrCalledFromCallback)
	}
	if err := g.stop(ctx); err != nil {
		return err
	}
	select {
	case g.shut <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.shut }()
	if g.shutDone {
		return g.shutErr
	}
	if g.released {
		ok, err := g.reclaim(ctx)
		if err != nil {
			return err
		}
		if !ok {
			g.log.Info("shutdown after close: another registration of the service on the client replaced the instance, or it was deregistered; nothing to deregister")
			g.shutDone, g.shutErr = true, nil
			g.track.Set(subscriber.RegistrationStopped, nil)
			return nil
		}
	}
	err := g.deregister(ctx)
	if err != nil && ctx.Err() != nil && !g.closeReq.Load() {
		// Not finished: a later call tries again.
		return err
	}
	g.shutDone, g.shutErr = true, err
	if !g.released {
		g.released = true
		g.h.release(g)
	}
	g.track.Set(subscriber.RegistrationStopped, err)
	return err
}

// reclaim takes the service's slot on the client back after Close, for
// the deregistration, if the client's connection still holds g's
// instance; false: another Registration of the service replaced it
// since, or it was deregistered, and a deregister request (which removes
// the connection's instance of the service whatever address it names)
// would remove the other's. A first registration of the service still in
// flight is waited for (bounded by ctx): if it fails, it gives the
// service back to g.
func (g *registration) reclaim(ctx context.Context) (bool, error) {
	var settled *registration // a holder seen with its Register returned
	for {
		h, holder := reclaimHub(g.client, g)
		switch {
		case h != nil:
			g.h, g.released = h, false
			return true, nil
		case holder == nil, holder == settled:
			return false, nil
		}
		select {
		case <-holder.settled:
			settled = holder // look again: it holds the slot, or gave it back
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// deregister deregisters and confirms, retrying until ctx is done.
func (g *registration) deregister(ctx context.Context) error {
	g.track.Deregistering()
	// The first request asks no gate; the retries pass the gates of
	// WithRegisterPolicy's options, each deferring a refusal as in Register.
	opts := g.cfg.retryOpts[:len(g.cfg.retryOpts):len(g.cfg.retryOpts)]
	r, err := rebound.NewRetrier(g.cfg.policy, append(opts,
		admit.Refuse(admit.Budget, admit.Defer).(rebound.Option),
		admit.Refuse(admit.Throttle, admit.Defer).(rebound.Option),
		admit.Refuse(admit.Breaker, admit.Defer).(rebound.Option),
		rebound.WithMaxAttempts(0), rebound.WithMaxElapsed(0),
		admit.First(0).(rebound.Option))...)
	if err != nil {
		return err // not reached: the same options compiled in Register
	}
	s := r.NewSchedule(time.Now())
	a, _ := s.Admit(time.Now())
	g.mu.Lock()
	in := g.inst
	g.mu.Unlock()
	var last error
	for {
		err := g.deregisterOnce(in)
		if err == nil {
			a.Done(nil, time.Now())
			return nil
		}
		last = err
		if errors.Is(err, errLookupUnsupported) {
			s.Cancel(time.Now()) // the confirmation cannot be made
			return err
		}
		// The Schedule decides: the delay, then the retry's admission,
		// waited until ctx is done.
		dec := a.Done(err, time.Now())
		for !dec.Stop && dec.Delay > 0 { // a wait: then Admit again
			g.track.SetAttempts(dec.Attempt)
			if werr := sleep(ctx, dec.Delay); werr != nil {
				s.Cancel(time.Now())
				return errors.Join(werr, last)
			}
			a, dec = s.Admit(time.Now())
		}
		if dec.Stop {
			return dec.Err
		}
	}
}

// sleep waits d, or until ctx is done (then it returns ctx.Err()).
func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deregisterOnce sends a deregister request (unless the server no longer
// lists the instance) and checks that the server no longer lists it.
func (g *registration) deregisterOnce(in model.Instance) error {
	start := time.Now()
	ok, err := g.client.DeregisterInstance(g.deregisterParam())
	switch {
	case err != nil && isShutdown(err):
		// The client is closed: its connection too. Confirm below.
		err = nil
	case err != nil:
		err = g.sdkErr("deregister", err)
	case !ok:
		err = opError("deregister", g.key, ErrRejected)
	}
	g.track.Attempt(regstate.OpDeregister, start, err)
	if err != nil {
		return err
	}
	disown(g.client, g) // the connection holds no instance of the service now
	// Still listed with the values this Registration sent: a redo that
	// raced with the deregister request registered it again, or the
	// server has not applied it yet. With other values it is another
	// client's instance at the same address (Nacos lists the address
	// while any connection holds it), which this one cannot remove.
	g.mu.Lock()
	sent := g.sent
	g.mu.Unlock()
	_, same, err := g.listed(regstate.OpDeregister, in)
	if err == nil && !same && !sameRegistered(sent, in) {
		_, same, err = g.listed(regstate.OpDeregister, sent)
	}
	if err != nil {
		return err
	}
	if same {
		return opError("deregister", g.key, errors.New("the server still lists the instance with the values it was registered with"))
	}
	return nil
}

var _ subscriber.Registration = (*registration)(nil)
