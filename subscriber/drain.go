package subscriber

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"sync"
	"time"
)

// Drain stops a provider without failing its consumers' calls. It
// deregisters every Registration in regs (Shutdown, concurrently), waits
// wait so consumers see them gone, then calls stop(ctx). For a gRPC
// server:
//
//	subscriber.Drain(ctx, 2*time.Second, func(ctx context.Context) error {
//		done := make(chan struct{})
//		go func() { srv.GracefulStop(); close(done) }()
//		select {
//		case <-done:
//			return nil
//		case <-ctx.Done():
//			srv.Stop()
//			<-done
//			return ctx.Err()
//		}
//	}, reg)
//
// A failed deregistration is returned, joined with stop's; the wait and
// stop still run. A done ctx ends the wait, not stop. A nil ctx or stop,
// or a negative wait, is a *rebound.ArgumentError; nil Registrations are
// skipped. Choosing wait: docs/providers.md.
func Drain(ctx context.Context, wait time.Duration, stop func(context.Context) error, regs ...Registration) error {
	const fn = "subscriber.Drain"
	switch {
	case ctx == nil:
		return argError(fn, "ctx", "must not be nil")
	case stop == nil:
		return argError(fn, "stop", "must not be nil")
	case wait < 0:
		return argError(fn, "wait", fmt.Sprintf("must be >= 0; got %v", wait))
	}
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		if r == nil {
			continue
		}
		if nilness.Is(r) {
			continue // a typed nil: a Registration that was never made
		}
		wg.Go(func() {
			if err := r.Shutdown(ctx); err != nil {
				errs[i] = fmt.Errorf("subscriber: drain: deregister %v: %w", r.Key(), err)
			}
		})
	}
	wg.Wait()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("subscriber: drain: stop: %w", err))
	}
	return errors.Join(errs...)
}
