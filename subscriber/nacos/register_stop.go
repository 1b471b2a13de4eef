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
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.detached {
		g.detached = true
		g.h.detach(g)
	}
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
	shut := g.shut()
	select {
	case shut <- struct{}{}:
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
	<-shut
	g.track.Set(subscriber.RegistrationStopped, nil)
	return nil
}

// Shutdown stops repairing and deregisters the instance: a deregister
// request (which also removes the SDK's redo entry, so no later reconnect
// registers it again), then a query of the server's list; it returns nil
// once the server no longer lists the instance with the values this
// Registration sent, retrying both (through the registration's policy)
// until then or until ctx is done (it then returns ctx's error, or the
// last attempt's). The address listed with other values, or with the same
// ones after two accepted deregister requests in a row, is another
// client's instance, which this client cannot remove: Shutdown returns
// nil. A closed client counts as
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
	shut := g.shut()
	select {
	case shut <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-shut }()
	// The engine calls the observers in the deregistration's requests:
	// Close, Shutdown and Update called there do not wait for them.
	in := g.track.Enter()
	defer g.track.Leave(in)
	if g.shutDone {
		return g.shutErr
	}
	if g.released {
		ok, err := g.reclaim(ctx)
		if err != nil {
			return err
		}
		if !ok {
			g.logger().Info("shutdown after close: another registration of the service on the client replaced the instance, or it was deregistered; nothing to deregister")
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
	for {
		h, holder, settling := reclaimHub(g.h.client, g)
		switch {
		case h != nil:
			g.h, g.released = h, false
			return true, nil
		case holder == nil:
			return false, nil
		}
		select {
		case <-settling: // look again: it holds the slot, or gave it back
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// deregister deregisters and confirms, retrying until ctx is done.
func (g *registration) deregister(ctx context.Context) error {
	g.track.Deregistering()
	// The first request asks no gate; the retries pass the gates of
	// WithPolicy's options, each deferring a refusal as in Register.
	r := g.cfg.dereg
	s := r.NewSchedule(time.Now())
	a, _ := s.Admit(time.Now())
	in := g.current()
	var last error
	var stillListed int // accepted requests in a row after which the lookup still listed the values
	for {
		err := g.deregisterOnce(in, &stillListed)
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
		if dec.Stop {
			return dec.Err
		}
		for d := dec.Delay; ; {
			g.track.SetAttempts(dec.Attempt)
			if werr := sleep(ctx, d); werr != nil {
				s.Cancel(time.Now())
				return errors.Join(werr, last)
			}
			if a, dec = s.Admit(time.Now()); !dec.Stop && dec.Delay == 0 {
				break // admitted
			}
			d = dec.Delay
			if dec.Stop {
				// As in the repair loop: only a limiter that grants no
				// token stops an admission; ask again, as a retry, after
				// a first delay.
				s.Reset(time.Now())
				s.Resume(0)
				d = admit.FirstDelay(s)
			}
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

// deregisterOnce sends a deregister request and checks that the server
// no longer lists the instance. Nacos keeps each connection's instance
// apart, removes only the sender's, and lists an address while any
// connection holds it; two connections holding equal values are listed
// once. So a lookup that still lists the values after an accepted request
// is a redo that raced it, a server not caught up yet, or another
// client's equal instance: the request is sent again (it cannot remove
// another connection's instance), and a second accepted request in a row
// followed by the same lookup ends the deregistration (*stillListed
// counts them).
func (g *registration) deregisterOnce(in model.Instance, stillListed *int) error {
	start := time.Now()
	ok, err := g.h.client.DeregisterInstance(g.deregisterParam())
	switch {
	case err != nil && isShutdown(err):
		// The client is closed: its connection too. Confirm below.
		err = nil
	case err != nil:
		err = g.sdkErr("deregister", err)
	case !ok:
		err = opError("deregister", g.Key(), ErrRejected)
	}
	g.track.Attempt(regstate.OpDeregister, start, err)
	if err != nil {
		*stillListed = 0
		return err
	}
	disown(g.h.client, g) // the connection holds no instance of the service now
	// With other values than this Registration sent, the address listed
	// is another client's instance, which this one cannot remove.
	g.mu.Lock()
	sent := g.sent
	g.mu.Unlock()
	_, same, err := g.listed(regstate.OpDeregister, in)
	if err == nil && !same && sent != nil && !sameRegistered(*sent, in) {
		_, same, err = g.listed(regstate.OpDeregister, *sent)
	}
	if err != nil {
		return err
	}
	if !same {
		return nil
	}
	if *stillListed++; *stillListed >= 2 {
		g.logger().Info("the server still lists the instance after two accepted deregister requests: another client's connection holds the same instance")
		return nil
	}
	return opError("deregister", g.Key(), errors.New("the server still lists the instance with the values it was registered with"))
}

var _ subscriber.Registration = (*registration)(nil)
