package reboundgrpc

import (
	"context"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"time"

	"google.golang.org/grpc"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// DefaultDrainWait is a wait for Drain, between the registry's
// confirmation that the instance is gone and the server's GracefulStop,
// that covers the time consumers need to hear of it. It is the sum of
// what a Nacos 2.x server adds to a push (it batches a service's changes
// for nacos.naming.push.pushTaskDelay, 500 ms by default, and re-sends a
// failed push after pushTaskRetryDelay, 1 s), and a 500 ms margin for the
// consumers' resolvers and balancers to swap their pickers. An etcd watch
// delivers within milliseconds on a healthy cluster; measured figures for
// both registries are in docs/providers.md.
const DefaultDrainWait = 2 * time.Second

// Drain stops srv without failing a call: subscriber.Drain with srv's
// GracefulStop as the stop. In this order:
//
//  1. every reg's Shutdown(ctx), at once: the instances leave the
//     registry (the adapters retry the deregistration and return once the
//     registry no longer lists them);
//  2. wait, the time consumers need to hear of it and stop picking this
//     server (DefaultDrainWait is a measured choice for both registries);
//  3. srv.GracefulStop(): the server stops accepting, and returns when the
//     calls in flight have finished; srv.Stop() when ctx ends first.
//
// srv is stopped in every case: a failed deregistration is returned
// (joined with any other error) after the wait and the stop, and a ctx
// that ends cuts the wait short and the graceful stop (Drain then
// returns an error matching ctx.Err()). Consumers may see calls fail when
// a deregistration failed: the registry lists the instance until its
// connection or lease ends.
//
// It returns a *rebound.ArgumentError, and stops nothing, for a nil ctx
// or srv, a negative wait, or a nil or typed-nil Registration.
func Drain(ctx context.Context, srv *grpc.Server, wait time.Duration, regs ...subscriber.Registration) error {
	if srv == nil {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "srv", Reason: "must not be nil"}
	}
	for i, r := range regs {
		if nilness.Is(r) {
			return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "regs", Reason: fmt.Sprintf("regs[%d] is nil", i)}
		}
	}
	if ctx == nil {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "ctx", Reason: "must not be nil"}
	}
	if wait < 0 {
		return &rebound.ArgumentError{Func: "reboundgrpc.Drain", Arg: "wait", Reason: fmt.Sprintf("must not be negative (got %v)", wait)}
	}
	err := subscriber.Drain(ctx, wait, func(ctx context.Context) error { return gracefulStop(ctx, srv) }, regs...)
	if err == nil {
		// subscriber.Drain cuts the wait short on ctx without an error.
		err = ctx.Err()
	}
	return err
}

// gracefulStop runs srv.GracefulStop, and srv.Stop when ctx ends first
// (which makes GracefulStop return too).
func gracefulStop(ctx context.Context, srv *grpc.Server) error {
	if ctx.Err() != nil {
		srv.Stop()
		return ctx.Err()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.GracefulStop()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		srv.Stop()
		<-done
		return ctx.Err()
	}
}
