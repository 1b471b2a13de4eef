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

// defaultDrainWait covers what a Nacos 2.x server adds to a push (500 ms
// batching, a 1 s re-send) and 500 ms for consumers to swap pickers
// (docs/providers.md).
const defaultDrainWait = 2 * time.Second

// Drain stops srv without failing a call: each reg's Shutdown, then a wait
// of wait (2 s is enough for Nacos and etcd, docs/providers.md), then
// srv.GracefulStop, or srv.Stop when ctx ends first. srv is stopped in
// every case; failed deregistrations and ctx's error are returned joined.
// A nil ctx, srv or Registration, or a negative wait, is a
// *rebound.ArgumentError and stops nothing.
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
