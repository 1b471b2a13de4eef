package subscriber

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"sync"
	"time"
)

// Drain stops a provider without failing its consumers' calls, in the
// three steps that order requires:
//
//  1. deregister: Shutdown every Registration in regs, concurrently (each
//     retries until the registry no longer lists its instance, or ctx is
//     done);
//  2. wait for wait, so that consumers can see the instances gone (the
//     registry's push, the consumers' resolvers and load balancers moving
//     their new calls elsewhere) while the provider still serves the
//     calls that reach it meanwhile;
//  3. stop serving: stop(ctx), for example a gRPC server's GracefulStop
//     (which finishes the calls in flight), falling back to Stop when ctx
//     is done.
//
// For a gRPC server:
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
// A failed deregistration does not stop the drain: the wait and stop
// still run (the process is going away; its instances go with its
// registry connection or lease), and the error is returned, joined with
// stop's. A ctx done during the wait skips the rest of it, not stop.
// Choose wait from what the consumers need: the registry's push latency
// plus the time their resolver takes to apply a list (for rebound's
// consumers, the Manager's delivery and the gRPC resolver's update).
//
// ctx must not be nil, stop must not be nil, wait must not be negative
// (a *rebound.ArgumentError, before anything is done); a nil Registration
// in regs (or a typed-nil pointer, a Registration that was never made)
// is skipped.
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
